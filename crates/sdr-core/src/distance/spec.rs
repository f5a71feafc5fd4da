//! Metric specs: parsing and canonical names (SPEC §3).
//!
//! Grammar: `name` or `name:key=value[,key=value]`. Omitted parameters take
//! the defaults below; [`Metric`]'s `Display` always prints every parameter,
//! which gives the canonical output keys (`uot:eps=0.1,tau=1`).

use std::fmt;
use std::str::FromStr;

use super::Evaluation;
use super::{chamfer, gw, hausdorff, hungarian, ot, partial, sinkhorn, uot};
use crate::cost::{CostMatrix, Element, PairCost, SetView};
use crate::error::{Result, SdrError};

/// Mass moved by partial OT.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rho {
    /// `min(n, m) / max(n, m)`.
    Adaptive,
    Fixed(f64),
}

/// A parsed metric configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Metric {
    Chamfer,
    Hausdorff,
    /// Exact earth mover's distance on `M~`.
    Ot,
    /// `<gamma_eps, M~>` with the entropic plan (default eps 0.1).
    Sinkhorn {
        eps: f64,
    },
    /// Unbalanced entropic OT (defaults eps 0.1, tau 1).
    Uot {
        eps: f64,
        tau: f64,
    },
    /// Entropic Gromov-Wasserstein (default eps 0.1).
    Gw {
        eps: f64,
    },
    HungNn,
    /// Mean matched cost + alpha * |n - m| (default alpha 0.5).
    HungPen {
        alpha: f64,
    },
    /// Exact partial OT moving mass rho (default adaptive).
    Pot {
        rho: Rho,
    },
}

impl Metric {
    /// The fifteen configurations of SPEC §3, in table order.
    pub fn all() -> Vec<Metric> {
        use Metric::*;
        vec![
            Chamfer,
            Hausdorff,
            Ot,
            Sinkhorn { eps: 0.01 },
            Sinkhorn { eps: 0.1 },
            Sinkhorn { eps: 0.5 },
            Uot { eps: 0.1, tau: 0.5 },
            Uot { eps: 0.1, tau: 1.0 },
            Gw { eps: 0.1 },
            HungNn,
            HungPen { alpha: 0.1 },
            HungPen { alpha: 0.5 },
            Pot { rho: Rho::Adaptive },
            Pot {
                rho: Rho::Fixed(0.5),
            },
            Pot {
                rho: Rho::Fixed(0.8),
            },
        ]
    }

    /// Family name (the part before `:`).
    pub fn family(&self) -> &'static str {
        match self {
            Metric::Chamfer => "chamfer",
            Metric::Hausdorff => "hausdorff",
            Metric::Ot => "ot",
            Metric::Sinkhorn { .. } => "sinkhorn",
            Metric::Uot { .. } => "uot",
            Metric::Gw { .. } => "gw",
            Metric::HungNn => "hung-nn",
            Metric::HungPen { .. } => "hung-pen",
            Metric::Pot { .. } => "pot",
        }
    }

    /// Whether the value is guaranteed to lie in `[0, 1]` (all but hung-pen).
    pub fn is_bounded(&self) -> bool {
        !matches!(self, Metric::HungPen { .. })
    }

    /// Whether [`Metric::evaluate`] needs the intra-set cost matrices.
    pub fn needs_intra(&self) -> bool {
        matches!(self, Metric::Gw { .. })
    }

    /// Distance between two sets of vectors (validated: see
    /// [`crate::EmbeddingSet`]): the value of [`Metric::evaluate`], converged
    /// or not. Callers that report convergence use [`evaluate_all`].
    pub fn distance<T: Element>(&self, a: &SetView<'_, T>, b: &SetView<'_, T>) -> Result<f64> {
        Ok(evaluate_all(std::slice::from_ref(self), a, b)?[0].value)
    }

    /// The metric on the cost matrices of one pair (`n, m >= 1`): value,
    /// convergence and iterations, for every family.
    ///
    /// # Errors
    /// [`SdrError::BadMetricParameter`] for a `Metric` built directly with a
    /// parameter the parser rejects (`eps <= 0`, `rho > 1`, ...), or GW
    /// without the intra-set costs.
    pub fn evaluate(&self, cost: &PairCost<'_>) -> Result<Evaluation> {
        let m: &CostMatrix = &cost.cross;
        Ok(match *self {
            Metric::Chamfer => Evaluation::exact(chamfer::chamfer(m)),
            Metric::Hausdorff => Evaluation::exact(hausdorff::hausdorff(m)),
            Metric::Ot => ot::ot_distance(m),
            Metric::Sinkhorn { eps } => sinkhorn::sinkhorn_distance(m, eps)?,
            Metric::Uot { eps, tau } => uot::uot_distance(m, eps, tau)?,
            Metric::Gw { eps } => {
                let Some((ca, cb)) = &cost.intra else {
                    return Err(bad(
                        &self.to_string(),
                        "needs the intra-set cost matrices (PairCost built without them)",
                    ));
                };
                gw::gw_distance(ca, cb, eps)?
            }
            Metric::HungNn => Evaluation::exact(hungarian::hung_nn(m)?),
            Metric::HungPen { alpha } => Evaluation::exact(hungarian::hung_pen(m, alpha)?),
            Metric::Pot { rho } => {
                let rho = match rho {
                    Rho::Adaptive => m.n.min(m.m) as f64 / m.n.max(m.m) as f64,
                    Rho::Fixed(r) => r,
                };
                partial::pot_distance(m, rho)?
            }
        })
    }
}

/// Several metrics between two validated sets, sharing one cost matrix (and
/// the intra-set matrices when GW is among them): the one path from two
/// embedded sets to distances that the CLI, the reward and the bindings use.
///
/// # Errors
/// An empty set, sets of different dimension, or a parameter the parser
/// would reject (see [`Metric::evaluate`]).
///
/// ```
/// use sdr_core::{distance::evaluate_all, Metric, SetView};
/// let a = [1.0, 0.0, 0.0, 1.0];
/// let b = [1.0, 1.0];
/// let out = evaluate_all(&[Metric::Chamfer, Metric::Ot], &SetView::new(&a, 2), &SetView::new(&b, 2)).unwrap();
/// assert!(out.iter().all(|e| e.converged && e.value > 0.0));
/// ```
pub fn evaluate_all<T: Element>(
    metrics: &[Metric],
    a: &SetView<'_, T>,
    b: &SetView<'_, T>,
) -> Result<Vec<Evaluation>> {
    let cost = PairCost::between(a, b, metrics.iter().any(Metric::needs_intra))?;
    metrics.iter().map(|m| m.evaluate(&cost)).collect()
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Metric::Sinkhorn { eps } => write!(f, "sinkhorn:eps={eps}"),
            Metric::Uot { eps, tau } => write!(f, "uot:eps={eps},tau={tau}"),
            Metric::Gw { eps } => write!(f, "gw:eps={eps}"),
            Metric::HungPen { alpha } => write!(f, "hung-pen:alpha={alpha}"),
            Metric::Pot { rho: Rho::Adaptive } => f.write_str("pot:rho=adaptive"),
            Metric::Pot { rho: Rho::Fixed(r) } => write!(f, "pot:rho={r}"),
            other => f.write_str(other.family()),
        }
    }
}

fn bad(metric: &str, message: impl Into<String>) -> SdrError {
    SdrError::BadMetricParameter {
        metric: metric.to_string(),
        message: message.into(),
    }
}

fn positive(spec: &str, key: &str, v: &str) -> Result<f64> {
    let x: f64 = v
        .parse()
        .map_err(|_| bad(spec, format!("`{key}={v}` is not a number")))?;
    if !(x.is_finite() && x > 0.0) {
        return Err(bad(
            spec,
            format!("`{key}` must be a finite number > 0, got {v}"),
        ));
    }
    Ok(x)
}

impl FromStr for Metric {
    type Err = SdrError;

    fn from_str(spec: &str) -> Result<Metric> {
        let spec = spec.trim();
        let (name, params) = match spec.split_once(':') {
            Some((n, p)) => (n.trim(), p),
            None => (spec, ""),
        };
        let mut kv: Vec<(&str, &str)> = Vec::new();
        for part in params.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| bad(spec, format!("parameter `{part}` is not key=value")))?;
            let k = k.trim();
            if kv.iter().any(|(seen, _)| *seen == k) {
                return Err(bad(spec, format!("parameter `{k}` given twice")));
            }
            kv.push((k, v.trim()));
        }
        let allowed: &[&str] = match name {
            "chamfer" | "hausdorff" | "ot" | "hung-nn" => &[],
            "sinkhorn" | "gw" => &["eps"],
            "uot" => &["eps", "tau"],
            "hung-pen" => &["alpha"],
            "pot" => &["rho"],
            _ => return Err(SdrError::UnknownMetric(spec.to_string())),
        };
        if let Some((k, _)) = kv.iter().find(|(k, _)| !allowed.contains(k)) {
            let expected = if allowed.is_empty() {
                "none".to_string()
            } else {
                allowed.join(", ")
            };
            return Err(bad(
                spec,
                format!("unknown parameter `{k}` (expected: {expected})"),
            ));
        }
        let get = |k: &str| kv.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
        let num = |k: &str, default: f64| match get(k) {
            Some(v) => positive(spec, k, v),
            None => Ok(default),
        };
        Ok(match name {
            "chamfer" => Metric::Chamfer,
            "hausdorff" => Metric::Hausdorff,
            "ot" => Metric::Ot,
            "hung-nn" => Metric::HungNn,
            "sinkhorn" => Metric::Sinkhorn {
                eps: num("eps", 0.1)?,
            },
            "gw" => Metric::Gw {
                eps: num("eps", 0.1)?,
            },
            "uot" => Metric::Uot {
                eps: num("eps", 0.1)?,
                tau: num("tau", 1.0)?,
            },
            "hung-pen" => {
                let alpha = match get("alpha") {
                    Some(v) => {
                        let a: f64 = v
                            .parse()
                            .map_err(|_| bad(spec, format!("`alpha={v}` is not a number")))?;
                        if !(a.is_finite() && a >= 0.0) {
                            return Err(bad(spec, format!("`alpha` must be >= 0, got {v}")));
                        }
                        a
                    }
                    None => 0.5,
                };
                Metric::HungPen { alpha }
            }
            "pot" => Metric::Pot {
                rho: match get("rho") {
                    None | Some("adaptive") => Rho::Adaptive,
                    Some(v) => {
                        let r = positive(spec, "rho", v)?;
                        if r > 1.0 {
                            return Err(bad(spec, format!("`rho` must be in (0, 1], got {v}")));
                        }
                        Rho::Fixed(r)
                    }
                },
            },
            _ => unreachable!("names checked above"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_names_round_trip() {
        let names: Vec<String> = Metric::all().iter().map(|m| m.to_string()).collect();
        assert_eq!(
            names,
            [
                "chamfer",
                "hausdorff",
                "ot",
                "sinkhorn:eps=0.01",
                "sinkhorn:eps=0.1",
                "sinkhorn:eps=0.5",
                "uot:eps=0.1,tau=0.5",
                "uot:eps=0.1,tau=1",
                "gw:eps=0.1",
                "hung-nn",
                "hung-pen:alpha=0.1",
                "hung-pen:alpha=0.5",
                "pot:rho=adaptive",
                "pot:rho=0.5",
                "pot:rho=0.8",
            ]
        );
        for (m, n) in Metric::all().iter().zip(&names) {
            assert_eq!(&n.parse::<Metric>().unwrap(), m);
        }
    }

    #[test]
    fn defaults_and_spacing() {
        assert_eq!(
            "sinkhorn".parse::<Metric>().unwrap().to_string(),
            "sinkhorn:eps=0.1"
        );
        assert_eq!(
            " uot:tau=0.5 ".parse::<Metric>().unwrap().to_string(),
            "uot:eps=0.1,tau=0.5"
        );
        assert_eq!(
            "pot".parse::<Metric>().unwrap().to_string(),
            "pot:rho=adaptive"
        );
        assert_eq!(
            "uot:tau=1.0,eps=0.10"
                .parse::<Metric>()
                .unwrap()
                .to_string(),
            "uot:eps=0.1,tau=1"
        );
    }

    #[test]
    fn errors_are_specific() {
        let e = |s: &str| s.parse::<Metric>().unwrap_err().to_string();
        assert!(e("chamfre").contains("unknown metric `chamfre`"));
        assert!(e("sinkhorn:epsilon=0.1").contains("unknown parameter `epsilon`"));
        assert!(e("sinkhorn:eps=-1").contains("> 0"));
        assert!(e("sinkhorn:eps=abc").contains("not a number"));
        assert!(e("pot:rho=1.5").contains("(0, 1]"));
        assert!(e("chamfer:eps=1").contains("expected: none"));
        assert!(e("uot:eps=0.1,eps=0.2").contains("twice"));
        assert!(e("gw:eps").contains("key=value"));
    }

    #[test]
    fn evaluate_reports_bad_parameters_instead_of_nan() {
        let a = [1.0, 0.0, 0.0, 1.0];
        let b = [1.0, 1.0, 0.5, -1.0];
        let (a, b) = (SetView::new(&a, 2), SetView::new(&b, 2));
        for m in [
            Metric::Sinkhorn { eps: -1.0 },
            Metric::Uot {
                eps: 0.1,
                tau: f64::INFINITY,
            },
            Metric::Gw { eps: 0.0 },
            Metric::Pot {
                rho: Rho::Fixed(1.5),
            },
        ] {
            assert!(evaluate_all(&[m], &a, &b).is_err(), "{m}");
        }
        // GW needs the intra costs; a PairCost without them is an error, not a panic.
        let cost = PairCost::between(&a, &b, false).unwrap();
        let err = Metric::Gw { eps: 0.1 }.evaluate(&cost).unwrap_err();
        assert!(err.to_string().contains("intra-set"), "{err}");
    }

    #[test]
    fn every_family_reports_convergence() {
        let a = [1.0, 0.0, 0.0, 1.0, 0.6, 0.8];
        let b = [1.0, 1.0, 0.5, -1.0];
        let out = evaluate_all(&Metric::all(), &SetView::new(&a, 2), &SetView::new(&b, 2)).unwrap();
        for (m, e) in Metric::all().iter().zip(&out) {
            assert!(e.converged && e.value.is_finite(), "{m}: {e:?}");
            let iterative = matches!(
                m,
                Metric::Sinkhorn { .. } | Metric::Uot { .. } | Metric::Gw { .. }
            );
            if iterative {
                assert!(e.iterations > 0, "{m}");
            }
        }
    }
}
