//! The gRPC connection: one HTTP/2 channel shared by the data and admin
//! clients, plaintext to the emulator or TLS with Application Default
//! Credentials to Google, and the per-request metadata (auth token, routing
//! header).

use std::sync::Arc;
use std::time::Duration;

use affinity_model::{Error, Result};
use base64::Engine as _;
use gcp_auth::TokenProvider;
use googleapis_tonic_google_bigtable_admin_v2::google::bigtable::admin::v2::bigtable_table_admin_client::BigtableTableAdminClient;
use googleapis_tonic_google_bigtable_v2::google::bigtable::v2::bigtable_client::BigtableClient;
use googleapis_tonic_google_bigtable_v2::google::bigtable::v2::FeatureFlags;
use prost::Message as _;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

/// Largest message sent or received: a 100 MiB cell plus its framing, with
/// room to spare.
pub(crate) const MAX_MESSAGE_BYTES: usize = 256 * 1024 * 1024;

const DATA_HOST: &str = "bigtable.googleapis.com";
const ADMIN_HOST: &str = "bigtableadmin.googleapis.com";
const DATA_SCOPE: &str = "https://www.googleapis.com/auth/bigtable.data";
const ADMIN_SCOPE: &str = "https://www.googleapis.com/auth/bigtable.admin.table";

/// Which service a request goes to (it decides the OAuth scope).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Api {
    Data,
    Admin,
}

/// Where to connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The emulator at `host:port`: plaintext, no credentials.
    Emulator(String),
    /// Cloud Bigtable over TLS, with Application Default Credentials.
    Cloud,
}

impl Target {
    /// The emulator when `BIGTABLE_EMULATOR_HOST` is set, else Cloud
    /// Bigtable.
    pub fn from_env() -> Target {
        match std::env::var("BIGTABLE_EMULATOR_HOST") {
            Ok(host) if !host.trim().is_empty() => Target::Emulator(host.trim().to_string()),
            _ => Target::Cloud,
        }
    }
}

/// Clients and credentials; cheap to clone into tasks.
#[derive(Clone)]
pub(crate) struct Conn {
    data: BigtableClient<Channel>,
    admin: BigtableTableAdminClient<Channel>,
    auth: Option<Arc<dyn TokenProvider>>,
    features: MetadataValue<tonic::metadata::Ascii>,
}

/// The `bigtable-features` header: what this client supports, as a
/// web-safe base64 `FeatureFlags` message. Servers (the emulator included)
/// refuse reversed reads from clients that do not announce them.
fn feature_flags() -> Result<MetadataValue<tonic::metadata::Ascii>> {
    let flags = FeatureFlags {
        reverse_scans: true,
        last_scanned_row_responses: true,
        ..FeatureFlags::default()
    };
    let encoded = base64::engine::general_purpose::URL_SAFE.encode(flags.encode_to_vec());
    MetadataValue::try_from(encoded)
        .map_err(|e| Error::Internal(format!("feature flags are not a header value: {e}")))
}

fn endpoint(uri: String) -> Result<Endpoint> {
    let endpoint = Endpoint::from_shared(uri.clone())
        .map_err(|e| Error::InvalidArgument(format!("invalid bigtable endpoint {uri:?}: {e}")))?;
    Ok(endpoint
        .connect_timeout(Duration::from_secs(10))
        .tcp_nodelay(true)
        // Wide windows: a 100 MiB cell streams without stop-and-go, and
        // h2's budget for small buffered frames grows with the window.
        .initial_stream_window_size(Some(16 * 1024 * 1024))
        .initial_connection_window_size(Some(32 * 1024 * 1024))
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(20))
        .keep_alive_while_idle(true))
}

async fn connect_channel(endpoint: Endpoint, what: &str) -> Result<Channel> {
    endpoint
        .connect()
        .await
        .map_err(|e| Error::Unavailable(format!("cannot connect to {what}: {e}")))
}

impl Conn {
    /// Connect (eagerly, so a wrong address fails here, not on first use).
    pub(crate) async fn connect(target: &Target) -> Result<Conn> {
        let (data_channel, admin_channel, auth) = match target {
            Target::Emulator(host) => {
                let channel = connect_channel(
                    endpoint(format!("http://{host}"))?,
                    &format!("the bigtable emulator at {host}"),
                )
                .await?;
                (channel.clone(), channel, None)
            }
            Target::Cloud => {
                let auth = gcp_auth::provider().await.map_err(|e| {
                    Error::Unavailable(format!("no application default credentials: {e}"))
                })?;
                let tls = |host: &str| {
                    endpoint(format!("https://{host}"))?
                        .tls_config(ClientTlsConfig::new().with_native_roots().domain_name(host))
                        .map_err(|e| Error::Internal(format!("tls setup for {host}: {e}")))
                };
                let data = connect_channel(tls(DATA_HOST)?, DATA_HOST).await?;
                let admin = connect_channel(tls(ADMIN_HOST)?, ADMIN_HOST).await?;
                (data, admin, Some(auth))
            }
        };
        Ok(Conn {
            data: BigtableClient::new(data_channel)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
            admin: BigtableTableAdminClient::new(admin_channel)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
            auth,
            features: feature_flags()?,
        })
    }

    pub(crate) fn data(&self) -> BigtableClient<Channel> {
        self.data.clone()
    }

    pub(crate) fn admin(&self) -> BigtableTableAdminClient<Channel> {
        self.admin.clone()
    }

    /// Wrap a message with the metadata Cloud Bigtable expects: a bearer
    /// token (not for the emulator) and the routing header naming the
    /// resource (`table_name=...`, `parent=...` or `name=...`).
    pub(crate) async fn request<T>(
        &self,
        message: T,
        api: Api,
        routing_key: &str,
        resource: &str,
    ) -> Result<tonic::Request<T>, tonic::Status> {
        let mut request = tonic::Request::new(message);
        let params = format!("{routing_key}={}", percent_encode(resource));
        if let Ok(value) = MetadataValue::try_from(params.as_str()) {
            request
                .metadata_mut()
                .insert("x-goog-request-params", value);
        }
        if matches!(api, Api::Data) {
            request
                .metadata_mut()
                .insert("bigtable-features", self.features.clone());
        }
        if let Some(auth) = &self.auth {
            let scope = match api {
                Api::Data => DATA_SCOPE,
                Api::Admin => ADMIN_SCOPE,
            };
            let token = auth.token(&[scope]).await.map_err(|e| {
                tonic::Status::unavailable(format!("cannot get an access token: {e}"))
            })?;
            let value =
                MetadataValue::try_from(format!("Bearer {}", token.as_str())).map_err(|e| {
                    tonic::Status::unauthenticated(format!(
                        "access token is not a header value: {e}"
                    ))
                })?;
            request.metadata_mut().insert("authorization", value);
        }
        Ok(request)
    }
}

/// Percent-encode everything but RFC 3986's unreserved characters.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_values_are_percent_encoded() {
        assert_eq!(
            percent_encode("projects/p/instances/i/tables/t-1"),
            "projects%2Fp%2Finstances%2Fi%2Ftables%2Ft-1"
        );
    }
}
