pub mod distances;
pub mod embed;
pub mod parse;
