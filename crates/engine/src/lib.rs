//! Personalization engine (in progress).
