//! The HTML page of `sdr explain --html`: one self-contained file (inline CSS,
//! no script, no font or image to fetch) with, per study, the candidate's and
//! the reference's sentences side by side. Each reference sentence has a
//! colour; a candidate sentence carries the colour of its partner, so pairs
//! read at a glance. Costs are numbers with a bar; costs above the threshold,
//! missing and unsupported sentences are highlighted. A summary table with
//! links to every study comes first, so a page of 100 studies stays usable.

use std::fmt::Write as _;

use sdr_core::explain::{ExplainOptions, SectionExplanation, SentenceExplanation};

use super::{id_label, Study};

const CSS: &str = r#"
:root{--bad:#b42318;--bad-bg:#fef3f2;--warn:#b54708;--warn-bg:#fffaeb;--ink:#1d2939;--muted:#667085;--line:#e4e7ec}
*{box-sizing:border-box}
body{margin:0;background:#f5f6f8;color:var(--ink);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Liberation Sans","DejaVu Sans",sans-serif}
main{max-width:1400px;margin:0 auto;padding:18px 22px 48px}
h1{font-size:21px;margin:0 0 2px}
.meta,.legend{color:var(--muted);margin:2px 0}
.legend .m,.legend .u{padding:0 4px;border-radius:3px;font-weight:600}
.m{color:var(--bad);background:var(--bad-bg)}.u{color:var(--warn);background:var(--warn-bg)}
table.summary{border-collapse:collapse;margin:12px 0 4px;background:#fff;border:1px solid var(--line);font-variant-numeric:tabular-nums}
table.summary th,table.summary td{padding:3px 12px;border-bottom:1px solid var(--line);text-align:right}
table.summary th:first-child,table.summary td:first-child{text-align:left}
table.summary th{background:#f9fafb;font-weight:600;color:var(--muted)}
a{color:#175cd3;text-decoration:none}
.study{background:#fff;border:1px solid var(--line);border-radius:8px;margin:16px 0;padding:12px 16px 14px}
.study h2{font-size:16px;margin:0 0 4px;display:flex;flex-wrap:wrap;gap:6px 16px;align-items:baseline}
.study h2 .r{font-variant-numeric:tabular-nums}
.study h2 small{font-size:13px;font-weight:400;color:var(--muted)}
h3{font-size:12px;letter-spacing:.05em;text-transform:uppercase;color:var(--muted);margin:12px 0 4px;font-weight:600}
h3 span{text-transform:none;letter-spacing:0;font-weight:400}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:18px}
h4{font-size:12px;margin:0 0 2px;color:var(--muted);font-weight:600}
ol{list-style:none;margin:0;padding:0}
li{display:grid;grid-template-columns:58px 1fr 118px;gap:8px;align-items:start;padding:3px 6px;margin:2px 0;border-left:5px solid var(--c);border-radius:3px}
li.missing{background:var(--bad-bg)}li.unsupported{background:var(--warn-bg)}
.tag{font:600 11px/19px ui-monospace,"DejaVu Sans Mono",monospace;text-align:center;border-radius:3px;background:var(--c);color:#fff;white-space:nowrap}
.flag{font-size:11px;font-weight:700;letter-spacing:.03em;text-transform:uppercase;margin-left:6px}
.missing .flag{color:var(--bad)}.unsupported .flag{color:var(--warn)}
.near{display:block;font-size:12px;color:var(--muted)}
.cost{font:12px/19px ui-monospace,"DejaVu Sans Mono",monospace;color:var(--muted);text-align:right;white-space:nowrap}
.cost b{color:var(--bad)}
.bar{display:inline-block;width:44px;height:6px;margin-left:6px;background:#eaecf0;border-radius:3px;vertical-align:middle;overflow:hidden}
.bar i{display:block;height:100%;background:#98a2b3}
.bar i.hi{background:var(--bad)}
pre{white-space:pre-wrap;background:#f9fafb;border:1px solid var(--line);border-radius:4px;padding:6px 8px;font-size:12px;max-height:12em;overflow:auto}
footer{color:var(--muted);font-size:12px;margin-top:24px}
"#;

/// Grey for sentences without a partner.
const UNPAIRED: &str = "#98a2b3";

/// Colours of reference sentences, cycled: dark enough for white labels, and
/// no reds or oranges, which mark missing and unsupported sentences.
const PALETTE: [&str; 10] = [
    "#1f6fb2", "#2a9d4b", "#7b3fb5", "#0f8a8a", "#8c6d1f", "#b5408a", "#3d52c4", "#5d7a1f",
    "#6b4b3a", "#0b7fc0",
];

/// Colour of reference sentence `j`.
fn colour(j: usize) -> String {
    PALETTE[j % PALETTE.len()].to_string()
}

/// HTML-escape text (element content and attribute values).
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn num(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.3}")
    } else {
        "n/a".into()
    }
}

/// The whole page.
pub(crate) fn render(studies: &[Study], options: &ExplainOptions, encoder: &str) -> String {
    let tau = options.threshold;
    let metric = options.reward.metric.to_string();
    let mut h = String::with_capacity(4096 + studies.len() * 6000);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>SDR explain: {n} {studies_word}, {metric}</title><style>{CSS}</style></head>\n<body><main>\n\
         <h1>Why each report scored as it did</h1>\n\
         <p class=\"meta\">metric <b>{metric}</b> &middot; threshold &tau; = {tau} &middot; {n} {studies_word} &middot; \
         reward = format + (1 &minus; min(D<sub>F</sub>, 1)) + (1 &minus; min(D<sub>I</sub>, 1)), at most 3</p>\n\
         <p class=\"legend\">Each reference sentence R<i>j</i> has a colour; a candidate sentence C<i>i</i> takes the colour \
         of the reference sentence the metric pairs it with. Cost = (1 &minus; cos)/2 of the pair, \
         in bold above &tau;. <span class=\"m\">Missing</span>: a reference sentence whose nearest candidate \
         sentence costs more than &tau;. <span class=\"u\">Unsupported</span>: a candidate sentence whose nearest \
         reference sentence costs more than &tau;.</p>\n",
        n = studies.len(),
        studies_word = if studies.len() == 1 { "study" } else { "studies" },
        metric = esc(&metric),
    );
    if studies.len() > 1 {
        summary(&mut h, studies);
    }
    for (k, study) in studies.iter().enumerate() {
        study_html(&mut h, k, study, tau);
    }
    let _ = write!(
        h,
        "<footer>sdr {} &middot; encoder {} &middot; docs/SPEC.md &sect;9</footer>\n</main></body></html>\n",
        env!("CARGO_PKG_VERSION"),
        esc(encoder)
    );
    h
}

fn summary(h: &mut String, studies: &[Study]) {
    h.push_str(
        "<table class=\"summary\"><tr><th>study</th><th>reward</th><th>D findings</th>\
         <th>D impression</th><th>missing</th><th>unsupported</th></tr>\n",
    );
    for (k, s) in studies.iter().enumerate() {
        let e = &s.explanation;
        let (df, di, m, u) = match &e.sections {
            Some(x) => (
                num(x.findings.distance),
                num(x.impression.distance),
                (x.findings.missing.len() + x.impression.missing.len()).to_string(),
                (x.findings.unsupported.len() + x.impression.unsupported.len()).to_string(),
            ),
            None => (
                "malformed".into(),
                String::new(),
                String::new(),
                String::new(),
            ),
        };
        let _ = writeln!(
            h,
            "<tr><td><a href=\"#s{k}\">{}</a></td><td>{}</td><td>{df}</td><td>{di}</td><td>{m}</td><td>{u}</td></tr>",
            esc(&id_label(s.id.as_ref(), k)),
            num(e.reward)
        );
    }
    h.push_str("</table>\n");
}

fn study_html(h: &mut String, k: usize, study: &Study, tau: f64) {
    let e = &study.explanation;
    let _ = write!(
        h,
        "<section class=\"study\" id=\"s{k}\"><h2>Study {} <span class=\"r\">reward {}</span>",
        esc(&id_label(study.id.as_ref(), k)),
        num(e.reward)
    );
    let Some(sections) = &e.sections else {
        let text: String = study.candidate.chars().take(2000).collect();
        let cut = if text.len() < study.candidate.len() {
            " …"
        } else {
            ""
        };
        let _ = write!(
            h,
            "<small>malformed candidate (no Findings and Impression): reward 0</small></h2>\n\
             <h4>Candidate text</h4><pre>{}{cut}</pre>\n<h4>Reference</h4><ol>",
            esc(&text)
        );
        for (j, s) in study
            .reference
            .findings
            .iter()
            .chain(&study.reference.impression)
            .enumerate()
        {
            let _ = write!(
                h,
                "<li style=\"--c:{UNPAIRED}\"><span class=\"tag\">R{}</span><span>{}</span><span></span></li>",
                j + 1,
                esc(s)
            );
        }
        h.push_str("</ol></section>\n");
        return;
    };
    let _ = writeln!(
        h,
        "<small>{} missing, {} unsupported</small></h2>",
        sections.findings.missing.len() + sections.impression.missing.len(),
        sections.findings.unsupported.len() + sections.impression.unsupported.len(),
    );
    for (name, s) in [
        ("Findings", &sections.findings),
        ("Impression", &sections.impression),
    ] {
        section_html(h, name, s, tau);
    }
    h.push_str("</section>\n");
}

fn section_html(h: &mut String, name: &str, s: &SectionExplanation, tau: f64) {
    let _ = write!(
        h,
        "<h3>{name} <span>&middot; D = {} &middot; term {}{}</span></h3>\n<div class=\"pair\">",
        num(s.distance),
        num(s.reward),
        if s.converged {
            ""
        } else {
            " &middot; solver did not converge (last iterate)"
        }
    );
    for (side, list, flagged, own, other) in [
        ("Candidate", &s.candidate, &s.unsupported, 'C', 'R'),
        ("Reference", &s.reference, &s.missing, 'R', 'C'),
    ] {
        let _ = write!(h, "<div><h4>{side}</h4><ol>");
        for (i, sent) in list.iter().enumerate() {
            let flag = flagged.contains(&i);
            sentence_html(h, i, sent, own, other, flag, tau);
        }
        h.push_str("</ol></div>");
    }
    h.push_str("</div>\n");
}

fn sentence_html(
    h: &mut String,
    i: usize,
    s: &SentenceExplanation,
    own: char,
    other: char,
    flagged: bool,
    tau: f64,
) {
    // Pairs share the reference sentence's colour.
    let c = match (own, s.matched) {
        ('R', _) => colour(i),
        (_, Some(j)) => colour(j),
        (_, None) => UNPAIRED.to_string(),
    };
    let (class, flag) = match (flagged, own) {
        (false, _) => ("", ""),
        (true, 'C') => (" class=\"unsupported\"", "unsupported"),
        (true, _) => (" class=\"missing\"", "missing"),
    };
    let arrow = if own == 'C' { "&rarr;" } else { "&larr;" };
    let tag = match s.matched {
        Some(j) => format!("{own}{}{arrow}{other}{}", i + 1, j + 1),
        None => format!("{own}{}", i + 1),
    };
    let _ = write!(
        h,
        "<li{class} style=\"--c:{c}\"><span class=\"tag\">{tag}</span><span>{}",
        esc(&s.sentence)
    );
    if !flag.is_empty() {
        let _ = write!(h, "<span class=\"flag\">{flag}</span>");
    }
    let mut notes = Vec::new();
    if s.matched.is_none() {
        notes.push("not paired by the metric".to_string());
    }
    if s.matched != Some(s.nearest) {
        notes.push(format!(
            "nearest {other}{} at {}",
            s.nearest + 1,
            num(s.nearest_cost)
        ));
    }
    if let Some(m) = s.mass {
        notes.push(format!("mass {m:.3}"));
    }
    // The clinical cost's reason (SPEC §10); its sentence numbers are 0-based.
    if let Some(c) = &s.conflict {
        notes.push(format!("conflict: {}", esc(c)));
    }
    if !notes.is_empty() {
        let _ = write!(
            h,
            "<span class=\"near\">{}</span>",
            notes.join(" &middot; ")
        );
    }
    h.push_str("</span><span class=\"cost\">");
    if let Some(cost) = s.cost {
        let hi = cost > tau;
        let width = (cost / 0.5 * 100.0).clamp(2.0, 100.0);
        let _ = write!(
            h,
            "{}{}{}<span class=\"bar\"><i{} style=\"width:{width:.0}%\"></i></span>",
            if hi { "<b>" } else { "" },
            num(cost),
            if hi { "</b>" } else { "" },
            if hi { " class=\"hi\"" } else { "" },
        );
    }
    h.push_str("</span></li>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use sdr_core::explain::{ExplainedSections, ReportExplanation};
    use sdr_reward::ReferenceSections;

    fn sentence(text: &str, matched: Option<usize>, cost: f64) -> SentenceExplanation {
        SentenceExplanation {
            sentence: text.into(),
            matched,
            cost: matched.map(|_| cost),
            mass: None,
            nearest: matched.unwrap_or(0),
            nearest_cost: cost,
            conflict: None,
        }
    }

    fn study(valid: bool) -> Study {
        let section = SectionExplanation {
            distance: 0.2,
            converged: true,
            reward: 0.8,
            candidate: vec![
                sentence("Heart <normal> & \"fine\".", Some(0), 0.01),
                sentence("Large effusion.", Some(0), 0.4),
            ],
            reference: vec![sentence("Heart size normal.", Some(0), 0.01)],
            missing: vec![],
            unsupported: vec![1],
        };
        Study {
            id: Some(serde_json::json!("s<1>")),
            candidate: "<think>x</think>".into(),
            reference: ReferenceSections {
                findings: vec!["Heart size normal.".into()],
                impression: vec!["Normal.".into()],
            },
            explanation: ReportExplanation {
                metric: "chamfer".into(),
                cost: None,
                threshold: 0.2,
                format_valid: valid,
                reward: if valid { 2.6 } else { 0.0 },
                sections: valid.then(|| ExplainedSections {
                    findings: section.clone(),
                    impression: section,
                }),
            },
        }
    }

    #[test]
    fn the_page_is_self_contained_and_escaped() {
        let html = render(
            &[study(true), study(false)],
            &ExplainOptions::default(),
            "enc",
        );
        assert!(html.starts_with("<!DOCTYPE html>"));
        for external in [
            "<script", "<link", "src=", "@import", "url(", "http:", "https:",
        ] {
            assert!(!html.contains(external), "{external}");
        }
        assert!(html.contains("Heart &lt;normal&gt; &amp; &quot;fine&quot;."));
        assert!(html.contains("Study s&lt;1&gt;"));
        assert!(!html.contains("<think>"));
        assert!(html.contains("class=\"unsupported\""));
        assert!(html.contains("<b>0.400</b>"));
        assert!(html.contains("malformed candidate"));
        assert!(html.contains("href=\"#s1\""));
    }
}
