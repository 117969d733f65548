//! The command's surface, no hold semantics: `--help`, bad input and
//! usage messages, the docs' shell examples, `demo`.

mod demo;
mod docs_examples;
mod help;
mod input;
mod usage_messages;
