//! Located points on the Bigtable data model (in progress).
