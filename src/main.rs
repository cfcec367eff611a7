//! The `grammask` command-line tool.
fn main() {}
