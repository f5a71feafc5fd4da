//! The four tags of the model-output template
//! `<think>F</think><answer>I</answer>`, apart from its parser: the parser
//! (`template.rs`) uses the markup scanner (`markup.rs`, through the header
//! scanner and the segmenter), which must know the tags to leave them alone.

/// Opening tag of the Findings section.
pub const THINK_OPEN: &str = "<think>";
/// Closing tag of the Findings section.
pub const THINK_CLOSE: &str = "</think>";
/// Opening tag of the Impression section.
pub const ANSWER_OPEN: &str = "<answer>";
/// Closing tag of the Impression section.
pub const ANSWER_CLOSE: &str = "</answer>";

/// The four template tags, in template order.
pub const TEMPLATE_TAGS: [&str; 4] = [THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE];
