//! Retries with exponential backoff for calls that may be repeated.

use std::future::Future;
use std::time::Duration;

use crate::status::is_retryable;

/// How often and how patiently a failed call is tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries in all, the first included (at least 1).
    pub max_attempts: u32,
    /// Pause before the first retry; doubles after each failure.
    pub initial_backoff: Duration,
    /// Longest pause between two tries.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 6,
            initial_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_secs(2),
        }
    }
}

impl RetryPolicy {
    /// The pause before try number `attempt + 1` (`attempt` >= 1), with
    /// jitter in `[50%, 100%]` of the exponential value so clients that
    /// failed together do not retry together.
    pub(crate) fn backoff(&self, attempt: u32) -> Duration {
        let exp = self
            .initial_backoff
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
        let full = exp.min(self.max_backoff);
        full.mul_f64(rand::random_range(0.5..=1.0))
    }

    /// True when try number `attempt` (1-based) may be followed by another.
    pub(crate) fn may_retry(&self, attempt: u32) -> bool {
        attempt < self.max_attempts.max(1)
    }
}

/// Run `call` until it succeeds, fails with a code that is not retryable,
/// or runs out of attempts. `idempotent == false` means a single try.
pub(crate) async fn retry<T, F, Fut>(
    policy: RetryPolicy,
    idempotent: bool,
    mut call: F,
) -> Result<T, tonic::Status>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, tonic::Status>>,
{
    let mut attempt = 1;
    loop {
        match call().await {
            Ok(value) => return Ok(value),
            Err(status) if idempotent && is_retryable(&status) && policy.may_retry(attempt) => {
                tracing::debug!(attempt, code = ?status.code(), message = status.message(), "bigtable call failed; retrying");
                tokio::time::sleep(policy.backoff(attempt)).await;
                attempt += 1;
            }
            Err(status) => return Err(status),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn backoff_grows_and_is_capped() {
        let policy = RetryPolicy {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(300),
        };
        let first = policy.backoff(1);
        assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
        let late = policy.backoff(9);
        assert!(late >= Duration::from_millis(150) && late <= Duration::from_millis(300));
        assert!(policy.may_retry(9));
        assert!(!policy.may_retry(10));
    }

    #[tokio::test]
    async fn retries_only_retryable_idempotent_calls() {
        let policy = RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(1),
        };
        let calls = AtomicU32::new(0);
        let result: Result<(), _> = retry(policy, true, || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(tonic::Status::unavailable("down")) }
        })
        .await;
        assert_eq!(result.map_err(|s| s.code()), Err(tonic::Code::Unavailable));
        assert_eq!(calls.load(Ordering::SeqCst), 3);

        calls.store(0, Ordering::SeqCst);
        let _ = retry(policy, false, || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err::<(), _>(tonic::Status::unavailable("down")) }
        })
        .await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        calls.store(0, Ordering::SeqCst);
        let result = retry(policy, true, || {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 0 {
                    Err(tonic::Status::aborted("again"))
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(result.ok(), Some(1));
    }
}
