pub mod corpus;
pub mod distances;
pub mod embed;
pub mod parse;
pub mod select;
pub mod select_eval;
pub mod serve;
