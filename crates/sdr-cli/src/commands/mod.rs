pub mod distances;
pub mod parse;
