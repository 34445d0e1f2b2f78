//! The catalog: per index, objects with their facet attributes, so an
//! `objectIDs` event resolves to the facet filters of its objects.
//!
//! Every attribute of an object except `objectID` and `_geoloc` is a facet
//! attribute. A string, number or boolean is one value; an array holds one
//! value per element (nested arrays and objects are not facet values and
//! are ignored). `_geoloc` (`{"lat":..,"lng":..}`) is kept apart.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::scoring::FacetCounts;

/// One catalog object.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CatalogObject {
    pub object_id: String,
    /// `(facet, value)` pairs, in attribute order, duplicates kept.
    pub facets: Vec<(String, String)>,
    /// `(lat, lng)` from `_geoloc`.
    pub geoloc: Option<(f64, f64)>,
}

pub(crate) fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

impl CatalogObject {
    /// Parse one object (`{"objectID": "...", attributes...}`).
    pub fn from_json(value: &Value) -> Result<CatalogObject> {
        let obj: &Map<String, Value> = value.as_object().ok_or_else(|| Error::InvalidObject {
            reason: "must be a JSON object".into(),
        })?;
        let object_id = match obj.get("objectID") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => {
                return Err(Error::InvalidObject {
                    reason: "objectID must be a non-empty string".into(),
                })
            }
        };
        let mut out = CatalogObject {
            object_id,
            ..CatalogObject::default()
        };
        for (name, v) in obj {
            match name.as_str() {
                "objectID" => {}
                "_geoloc" => {
                    let lat = v.get("lat").and_then(Value::as_f64);
                    let lng = v.get("lng").and_then(Value::as_f64);
                    match (lat, lng) {
                        (Some(lat), Some(lng)) if lat.abs() <= 90.0 && lng.abs() <= 180.0 => {
                            out.geoloc = Some((lat, lng));
                        }
                        _ => {
                            return Err(Error::InvalidObject {
                                reason: format!(
                                "_geoloc of {:?} must be {{\"lat\":..,\"lng\":..}} within range",
                                out.object_id
                            ),
                            })
                        }
                    }
                }
                _ => match v {
                    Value::Array(items) => out
                        .facets
                        .extend(items.iter().filter_map(scalar).map(|s| (name.clone(), s))),
                    other => out.facets.extend(scalar(other).map(|s| (name.clone(), s))),
                },
            }
        }
        Ok(out)
    }

    /// The object as JSON (the stored form).
    pub fn to_json(&self) -> Value {
        let mut facets: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (f, v) in &self.facets {
            facets.entry(f).or_default().push(v);
        }
        let mut obj = Map::new();
        obj.insert("objectID".into(), Value::from(self.object_id.as_str()));
        for (f, vs) in facets {
            obj.insert(f.into(), Value::from(vs));
        }
        if let Some((lat, lng)) = self.geoloc {
            obj.insert(
                "_geoloc".into(),
                serde_json::json!({"lat": lat, "lng": lng}),
            );
        }
        Value::Object(obj)
    }
}

/// The objects of one index, in memory.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    objects: HashMap<String, CatalogObject>,
}

/// What resolving an event's objects found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Resolved {
    pub counts: FacetCounts,
    /// Object ids not in the catalog (counted, not fatal).
    pub unknown: usize,
}

impl Catalog {
    pub fn new() -> Catalog {
        Catalog::default()
    }

    /// Add or replace an object.
    pub fn insert(&mut self, object: CatalogObject) {
        self.objects.insert(object.object_id.clone(), object);
    }

    pub fn get(&self, object_id: &str) -> Option<&CatalogObject> {
        self.objects.get(object_id)
    }

    /// Every object, by objectID.
    pub fn objects(&self) -> Vec<&CatalogObject> {
        let mut all: Vec<&CatalogObject> = self.objects.values().collect();
        all.sort_by(|a, b| a.object_id.cmp(&b.object_id));
        all
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The `facet:value` counts of some objects: each facet value of each
    /// known object counts once per occurrence.
    pub fn resolve<S: AsRef<str>>(&self, object_ids: &[S]) -> Resolved {
        let mut out = Resolved::default();
        for id in object_ids {
            match self.objects.get(id.as_ref()) {
                Some(obj) => {
                    for (f, v) in &obj.facets {
                        out.counts.add(f, v, 1);
                    }
                }
                None => out.unknown += 1,
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_facets_arrays_and_geoloc() {
        let o = CatalogObject::from_json(
            &json!({"objectID":"p1","brand":"Apple","color":["Black","White"],
            "price":999,"new":true,"specs":{"x":1},"_geoloc":{"lat":45.5,"lng":-122.6}}),
        )
        .unwrap();
        let mut facets = o.facets.clone();
        facets.sort();
        assert_eq!(
            facets,
            vec![
                ("brand".to_string(), "Apple".to_string()),
                ("color".into(), "Black".into()),
                ("color".into(), "White".into()),
                ("new".into(), "true".into()),
                ("price".into(), "999".into()),
            ]
        );
        assert_eq!(o.geoloc, Some((45.5, -122.6)));
        let back = CatalogObject::from_json(&o.to_json()).unwrap();
        assert_eq!(back.geoloc, o.geoloc);
        assert!(CatalogObject::from_json(&json!({"brand":"x"}))
            .unwrap_err()
            .to_string()
            .contains("objectID"));
        assert!(
            CatalogObject::from_json(&json!({"objectID":"a","_geoloc":{"lat":100,"lng":0}}))
                .is_err()
        );
    }

    #[test]
    fn resolves_known_objects_and_counts_unknown_ones() {
        let mut c = Catalog::new();
        c.insert(
            CatalogObject::from_json(&json!({"objectID":"p1","brand":"Apple","color":["Black"]}))
                .unwrap(),
        );
        c.insert(CatalogObject::from_json(&json!({"objectID":"p2","brand":"Apple"})).unwrap());
        let r = c.resolve(&["p1", "p2", "nope"]);
        assert_eq!(r.unknown, 1);
        assert_eq!(r.counts.get("brand", "Apple"), 2);
        assert_eq!(r.counts.get("color", "Black"), 1);
    }
}
