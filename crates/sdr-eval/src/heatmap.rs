//! The policy × metric heatmap of the paper (Fig. "Method × metric
//! heatmap"): rows are selection policies (metric spec × aggregation)
//! grouped by distance family, columns are evaluation metrics, and each cell
//! is the percentage improvement over random, annotated with its value.
//! Teal cells beat random, coral cells lose to it (diverging scale centred
//! on 0, symmetric about the largest absolute value).
//!
//! Drawn with `plotters`' bitmap backend; text uses DejaVu Sans embedded in
//! the binary (crate `dejavu`) through plotters' `ab_glyph` renderer, so no
//! system font is needed. The PNG is written atomically.

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use sdr_io::AtomicFile;

use crate::error::{EvalError, Result};

/// What to draw.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Heatmap {
    pub title: String,
    /// Printed under the title, e.g. the BERTScore encoder and the baseline.
    pub subtitle: String,
    /// One label per row, e.g. `chamfer / min`.
    pub row_labels: Vec<String>,
    /// The family of each row, e.g. `OT`; consecutive equal groups are
    /// framed together.
    pub row_groups: Vec<String>,
    pub columns: Vec<String>,
    /// `values[row][col]`: improvement over random in percent; `None` draws
    /// a grey `n/a` cell.
    pub values: Vec<Vec<Option<f64>>>,
    /// Encoder used for BERTScore columns, printed on the figure (required
    /// when a column name starts with "BERTScore").
    pub bertscore_encoder: Option<String>,
}

const TEAL: (u8, u8, u8) = (0, 128, 128);
const CORAL: (u8, u8, u8) = (240, 100, 73);
const FONT: &str = "sans-serif";

fn register_font() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_ok()
    })
}

/// White at 0, teal at `+vmax`, coral at `-vmax`.
fn colour(v: f64, vmax: f64) -> RGBColor {
    let t = (v.abs() / vmax).clamp(0.0, 1.0);
    let (r, g, b) = if v >= 0.0 { TEAL } else { CORAL };
    let mix = |c: u8| (255.0 + (f64::from(c) - 255.0) * t).round() as u8;
    RGBColor(mix(r), mix(g), mix(b))
}

impl Heatmap {
    /// Checks shapes and values.
    ///
    /// # Errors
    /// [`EvalError::Empty`], [`EvalError::LengthMismatch`] or
    /// [`EvalError::NonFinite`].
    pub fn validate(&self) -> Result<()> {
        if self.row_labels.is_empty() {
            return Err(EvalError::Empty {
                what: "heatmap rows",
            });
        }
        if self.columns.is_empty() {
            return Err(EvalError::Empty {
                what: "heatmap columns",
            });
        }
        for (what, got) in [
            ("heatmap row_groups", self.row_groups.len()),
            ("heatmap values", self.values.len()),
        ] {
            if got != self.row_labels.len() {
                return Err(EvalError::LengthMismatch {
                    what,
                    expected: self.row_labels.len(),
                    got,
                });
            }
        }
        if self
            .columns
            .iter()
            .any(|c| c.to_ascii_lowercase().starts_with("bertscore"))
            && self
                .bertscore_encoder
                .as_deref()
                .is_none_or(|e| e.trim().is_empty())
        {
            return Err(EvalError::BadParameter {
                name: "bertscore_encoder",
                value: "none".into(),
                message: "a heatmap with a BERTScore column must name the encoder",
            });
        }
        for (i, row) in self.values.iter().enumerate() {
            if row.len() != self.columns.len() {
                return Err(EvalError::LengthMismatch {
                    what: "heatmap row values",
                    expected: self.columns.len(),
                    got: row.len(),
                });
            }
            if let Some(v) = row.iter().flatten().find(|v| !v.is_finite()) {
                return Err(EvalError::NonFinite {
                    what: "heatmap row",
                    index: i,
                    value: *v,
                });
            }
        }
        Ok(())
    }

    /// Renders the heatmap to a PNG at `path` (atomically: a temporary PNG
    /// beside it, then a rename).
    ///
    /// # Errors
    /// As [`Heatmap::validate`], [`EvalError::Plot`] when drawing fails and
    /// [`EvalError::Io`] when the file cannot be written.
    pub fn render_png(&self, path: &Path) -> Result<()> {
        let io = |source| EvalError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = AtomicFile::create(path).map_err(io)?;
        self.render_png_into(&mut file)?;
        file.commit().map_err(io)
    }

    /// Draws the PNG into `file`'s temporary file, leaving the commit to the
    /// caller (which can then publish several files only when all are drawn).
    ///
    /// # Errors
    /// As [`Heatmap::validate`], and [`EvalError::Plot`] naming the
    /// destination when drawing fails.
    pub fn render_png_into(&self, file: &mut AtomicFile) -> Result<()> {
        self.validate()?;
        let plot = |message: String| EvalError::Plot {
            path: file.dest().to_path_buf(),
            message,
        };
        if !register_font() {
            return Err(plot(
                "embedded DejaVu Sans font could not be registered".into(),
            ));
        }
        // plotters writes by path and picks PNG by the extension, which the
        // temporary file keeps.
        self.draw(file.temp_path()).map_err(plot)
    }

    fn draw(&self, file: &Path) -> std::result::Result<(), String> {
        let err = |e: &dyn std::fmt::Debug| format!("{e:?}");
        let label_font = (FONT, 15).into_font();
        let head_font = (FONT, 15).into_font();
        let cell_font = (FONT, 14).into_font();
        let title_font = (FONT, 20).into_font();
        let small_font = (FONT, 13).into_font();
        // Text extents, estimated with the same font renderer.
        let width_of =
            |s: &str, f: &FontDesc| f.box_size(s).map(|(w, _)| w).unwrap_or(8 * s.len() as u32);
        let label_w = self
            .row_labels
            .iter()
            .map(|s| width_of(s, &label_font))
            .max()
            .unwrap_or(0)
            + 16;
        let group_w = self
            .row_groups
            .iter()
            .map(|s| width_of(s, &label_font))
            .max()
            .unwrap_or(0)
            + 20;
        let cell_w = self
            .columns
            .iter()
            .map(|s| width_of(s, &head_font) + 16)
            .max()
            .unwrap_or(0)
            .max(84);
        let cell_h = 26u32;
        let (left, top) = (group_w + label_w, 96u32);
        let legend_w = 110u32;
        let n_rows = self.row_labels.len() as u32;
        let n_cols = self.columns.len() as u32;
        let subtitle = match &self.bertscore_encoder {
            Some(e)
                if self
                    .columns
                    .iter()
                    .any(|c| c.to_ascii_lowercase().starts_with("bertscore")) =>
            {
                if self.subtitle.is_empty() {
                    format!("BERTScore encoder: {e}")
                } else {
                    format!("{}; BERTScore encoder: {e}", self.subtitle)
                }
            }
            _ => self.subtitle.clone(),
        };
        let width = (left + n_cols * cell_w + legend_w)
            .max(width_of(&self.title, &title_font) + 40)
            .max(width_of(&subtitle, &small_font) + 40);
        let height = top + n_rows * cell_h + 40;

        let root = BitMapBackend::new(file, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let text = |s: &str, f: &FontDesc, x: i32, y: i32, h: HPos, c: &RGBColor| {
            root.draw(&Text::new(
                s.to_string(),
                (x, y),
                f.clone()
                    .into_text_style(&root)
                    .color(c)
                    .pos(Pos::new(h, VPos::Center)),
            ))
        };
        text(&self.title, &title_font, 16, 20, HPos::Left, &BLACK).map_err(|e| err(&e))?;
        text(
            &subtitle,
            &small_font,
            16,
            46,
            HPos::Left,
            &RGBColor(70, 70, 70),
        )
        .map_err(|e| err(&e))?;
        for (j, c) in self.columns.iter().enumerate() {
            let x = (left + j as u32 * cell_w + cell_w / 2) as i32;
            text(c, &head_font, x, (top - 16) as i32, HPos::Center, &BLACK).map_err(|e| err(&e))?;
        }
        let vmax = self
            .values
            .iter()
            .flatten()
            .flatten()
            .fold(0.0f64, |m, v| m.max(v.abs()))
            .max(1e-9);
        for (i, row) in self.values.iter().enumerate() {
            let y0 = (top + i as u32 * cell_h) as i32;
            text(
                &self.row_labels[i],
                &label_font,
                (left - 8) as i32,
                y0 + cell_h as i32 / 2,
                HPos::Right,
                &BLACK,
            )
            .map_err(|e| err(&e))?;
            for (j, v) in row.iter().enumerate() {
                let x0 = (left + j as u32 * cell_w) as i32;
                let (fill, label, ink) = match v {
                    Some(v) => {
                        let c = colour(*v, vmax);
                        let dark = (v.abs() / vmax) > 0.6;
                        (c, format!("{v:+.1}%"), if dark { WHITE } else { BLACK })
                    }
                    None => (
                        RGBColor(220, 220, 220),
                        "n/a".to_string(),
                        RGBColor(90, 90, 90),
                    ),
                };
                root.draw(&Rectangle::new(
                    [(x0, y0), (x0 + cell_w as i32, y0 + cell_h as i32)],
                    fill.filled(),
                ))
                .map_err(|e| err(&e))?;
                root.draw(&Rectangle::new(
                    [(x0, y0), (x0 + cell_w as i32, y0 + cell_h as i32)],
                    RGBColor(255, 255, 255).stroke_width(1),
                ))
                .map_err(|e| err(&e))?;
                text(
                    &label,
                    &cell_font,
                    x0 + cell_w as i32 / 2,
                    y0 + cell_h as i32 / 2,
                    HPos::Center,
                    &ink,
                )
                .map_err(|e| err(&e))?;
            }
        }
        // Family groups: name on the left, a dark rule between groups.
        let mut start = 0usize;
        for i in 1..=self.row_groups.len() {
            if i == self.row_groups.len() || self.row_groups[i] != self.row_groups[start] {
                let y0 = (top + start as u32 * cell_h) as i32;
                let y1 = (top + i as u32 * cell_h) as i32;
                text(
                    &self.row_groups[start],
                    &label_font,
                    8,
                    (y0 + y1) / 2,
                    HPos::Left,
                    &RGBColor(40, 40, 40),
                )
                .map_err(|e| err(&e))?;
                let right = (left + n_cols * cell_w) as i32;
                root.draw(&PathElement::new(
                    vec![(4, y1), (right, y1)],
                    BLACK.stroke_width(2),
                ))
                .map_err(|e| err(&e))?;
                if start == 0 {
                    root.draw(&PathElement::new(
                        vec![(4, y0), (right, y0)],
                        BLACK.stroke_width(2),
                    ))
                    .map_err(|e| err(&e))?;
                }
                start = i;
            }
        }
        // Colour bar.
        let bx = (left + n_cols * cell_w + 24) as i32;
        let (by0, by1) = (top as i32, (top + n_rows * cell_h) as i32);
        let steps = (by1 - by0).max(1);
        for k in 0..steps {
            let v = vmax * (1.0 - 2.0 * f64::from(k) / f64::from(steps));
            root.draw(&Rectangle::new(
                [(bx, by0 + k), (bx + 16, by0 + k + 1)],
                colour(v, vmax).filled(),
            ))
            .map_err(|e| err(&e))?;
        }
        for (v, y) in [(vmax, by0), (0.0, (by0 + by1) / 2), (-vmax, by1)] {
            text(
                &format!("{v:+.1}%"),
                &small_font,
                bx + 22,
                y,
                HPos::Left,
                &BLACK,
            )
            .map_err(|e| err(&e))?;
        }
        root.present().map_err(|e| err(&e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_diverge() {
        assert_eq!(colour(0.0, 1.0), RGBColor(255, 255, 255));
        assert_eq!(colour(1.0, 1.0), RGBColor(TEAL.0, TEAL.1, TEAL.2));
        assert_eq!(colour(-2.0, 1.0), RGBColor(CORAL.0, CORAL.1, CORAL.2));
    }

    #[test]
    fn shape_errors() {
        let h = Heatmap {
            title: "t".into(),
            subtitle: String::new(),
            row_labels: vec!["a".into()],
            row_groups: vec![],
            columns: vec!["BERTScore-F1".into()],
            values: vec![vec![Some(1.0)]],
            bertscore_encoder: None,
        };
        assert!(h.validate().is_err());
        let h = Heatmap {
            row_groups: vec!["g".into()],
            ..h
        };
        assert!(h.validate().is_err(), "BERTScore column without encoder");
        let h = Heatmap {
            bertscore_encoder: Some("all-mpnet-base-v2".into()),
            ..h
        };
        assert!(h.validate().is_ok());
    }
}
