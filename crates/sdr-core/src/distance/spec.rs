//! Metric specs: the registry of distance families, parsing and canonical
//! names (SPEC §3).
//!
//! Grammar: `name` or `name:key=value[,key=value]`. Omitted parameters take
//! the defaults below; [`Metric`]'s `Display` always prints every parameter,
//! which gives the canonical output keys (`uot:eps=0.1,tau=1`).
//!
//! Every family is one entry of `metric_families!` below: its variant, its
//! name, its parameters (type, default, check) and the `evaluate` function of
//! its file. The entry generates the variant, the parser, the canonical name
//! and the dispatch; adding a family is its file plus one entry.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::AtomicBool;

use super::params::{check_range, Rho, ALPHA_RANGE, EPS_RANGE, TAU_RANGE};
use super::stop::Stop;
use super::Evaluation;
use super::{chamfer, gw, hausdorff, hungarian, ot, partial, sinkhorn, uot};
use crate::cost::{Element, PairCost, SetView};
use crate::error::{Result, SdrError};

/// Declares the families: for each, the [`Metric`] variant with its
/// parameters, its spec name, each parameter's type, default and check
/// (`fn(spec, key, value) -> Result<T>`), the `evaluate(&PairCost, Stop,
/// params..)` that computes it, and two properties: whether it needs the
/// intra-set costs and whether its value is bounded by 1.
macro_rules! metric_families {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $name:literal
            $({ $($key:ident : $ty:ty = $default:expr, $check:path);+ $(;)? })?
            => $eval:path, intra: $intra:literal, bounded: $bounded:literal;
    )+) => {
        /// A parsed metric configuration.
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub enum Metric {
            $( $(#[$doc])* $variant $({ $($key: $ty),+ })?, )+
        }

        impl Metric {
            /// Family name (the part before `:`).
            pub fn family(&self) -> &'static str {
                match self {
                    $( Metric::$variant { .. } => $name, )+
                }
            }

            /// Whether the value is guaranteed to lie in `[0, 1]` (all but hung-pen).
            pub fn is_bounded(&self) -> bool {
                match self {
                    $( Metric::$variant { .. } => $bounded, )+
                }
            }

            /// Whether [`Metric::evaluate`] needs the intra-set cost matrices.
            pub fn needs_intra(&self) -> bool {
                match self {
                    $( Metric::$variant { .. } => $intra, )+
                }
            }

            /// The metric on the cost matrices of one pair (`n, m >= 1`):
            /// value, convergence and iterations, for every family.
            ///
            /// # Errors
            /// [`SdrError::BadMetricParameter`] for a `Metric` built directly
            /// with a parameter the parser rejects (`eps <= 0`, `rho > 1`,
            /// ...), or GW without the intra-set costs.
            pub fn evaluate(&self, cost: &PairCost<'_>) -> Result<Evaluation> {
                self.evaluate_with(cost, Stop::NEVER)
            }

            /// [`Metric::evaluate`] that gives up once `stop` is set: the
            /// solvers read it between iterations (simplex pivots, Sinkhorn
            /// sweeps and Newton steps, UOT iterations, GW steps and blocks
            /// of their products, Hungarian rows), so a stop is seen within
            /// milliseconds even on thousands of rows. Until it is set, the
            /// same result, bit for bit.
            ///
            /// # Errors
            /// Those of [`Metric::evaluate`], and [`SdrError::Stopped`] when
            /// `stop` was set before the value was computed.
            pub fn evaluate_until(
                &self,
                cost: &PairCost<'_>,
                stop: &AtomicBool,
            ) -> Result<Evaluation> {
                self.evaluate_with(cost, Stop::on(stop))
            }

            pub(crate) fn evaluate_with(&self, cost: &PairCost<'_>, stop: Stop<'_>) -> Result<Evaluation> {
                stop.check()?;
                match *self {
                    $( Metric::$variant $({ $($key),+ })? => $eval(cost, stop $($(, $key)+)?), )+
                }
            }

            /// Every family's spec form with its defaults, in registry
            /// order, for help texts: `chamfer`, `sinkhorn[:eps=0.1]`,
            /// `uot[:eps=0.1,tau=1]`, `pot[:rho=adaptive]`.
            ///
            /// ```
            /// let forms = sdr_core::Metric::forms();
            /// assert_eq!(forms[0], "chamfer");
            /// assert!(forms.contains(&"uot[:eps=0.1,tau=1]".to_string()));
            /// ```
            pub fn forms() -> Vec<String> {
                vec![$( {
                    #[allow(unused_mut)]
                    let mut form = String::from($name);
                    $(
                        let params: Vec<String> =
                            vec![$(format!("{}={}", stringify!($key), $default)),+];
                        form.push_str(&format!("[:{}]", params.join(",")));
                    )?
                    form
                }, )+]
            }

            /// Parameter names a family accepts; `None` for an unknown name.
            fn keys(name: &str) -> Option<&'static [&'static str]> {
                match name {
                    $( $name => Some(&[$($(stringify!($key)),+)?]), )+
                    _ => None,
                }
            }

            /// Build from a known family name and checked `key=value` pairs.
            fn build(spec: &str, name: &str, kv: &[(&str, &str)]) -> Result<Metric> {
                #[allow(unused_variables)]
                let get = |k: &str| kv.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
                Ok(match name {
                    $( $name => Metric::$variant $({ $(
                        $key: match get(stringify!($key)) {
                            Some(v) => $check(spec, stringify!($key), v)?,
                            None => $default,
                        },
                    )+ })?, )+
                    _ => return Err(SdrError::UnknownMetric(spec.to_string())),
                })
            }
        }

        impl fmt::Display for Metric {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $( Metric::$variant $({ $($key),+ })? => {
                        f.write_str($name)?;
                        $(
                            let mut sep = ':';
                            $(
                                write!(f, "{sep}{}={}", stringify!($key), $key)?;
                                sep = ',';
                            )+
                            let _ = sep;
                        )?
                        Ok(())
                    } )+
                }
            }
        }
    };
}

metric_families! {
    Chamfer = "chamfer" => chamfer::evaluate, intra: false, bounded: true;
    Hausdorff = "hausdorff" => hausdorff::evaluate, intra: false, bounded: true;
    /// Exact earth mover's distance on `M~`.
    Ot = "ot" => ot::evaluate, intra: false, bounded: true;
    /// `<gamma_eps, M~>` with the entropic plan (default eps 0.1).
    Sinkhorn = "sinkhorn" { eps: f64 = 0.1, eps_param }
        => sinkhorn::evaluate, intra: false, bounded: true;
    /// Unbalanced entropic OT (defaults eps 0.1, tau 1).
    Uot = "uot" { eps: f64 = 0.1, eps_param; tau: f64 = 1.0, tau_param }
        => uot::evaluate, intra: false, bounded: true;
    /// Entropic Gromov-Wasserstein (default eps 0.1).
    Gw = "gw" { eps: f64 = 0.1, eps_param } => gw::evaluate, intra: true, bounded: true;
    HungNn = "hung-nn" => hungarian::evaluate_nn, intra: false, bounded: true;
    /// Mean matched cost + alpha * |n - m| (default alpha 0.5).
    HungPen = "hung-pen" { alpha: f64 = 0.5, alpha_param }
        => hungarian::evaluate_pen, intra: false, bounded: false;
    /// Exact partial OT moving mass rho (default adaptive).
    Pot = "pot" { rho: Rho = Rho::Adaptive, rho_param } => partial::evaluate, intra: false, bounded: true;
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

    /// Distance between two sets of vectors (validated: see
    /// [`crate::EmbeddingSet`]): the value of [`Metric::evaluate`], converged
    /// or not. Callers that report convergence use [`evaluate_all`].
    pub fn distance<T: Element>(&self, a: &SetView<'_, T>, b: &SetView<'_, T>) -> Result<f64> {
        let cost = PairCost::between(a, b, self.needs_intra())?;
        Ok(self.evaluate(&cost)?.value)
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
    evaluate_all_with(metrics, a, b, Stop::NEVER)
}

/// [`evaluate_all`] that gives up once `stop` is set, between metrics and
/// inside each (see [`Metric::evaluate_until`]); the Python bindings set it on
/// Ctrl-C.
///
/// # Errors
/// Those of [`evaluate_all`], and [`SdrError::Stopped`] when `stop` was set
/// before every value was computed.
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use sdr_core::{distance::evaluate_all_until, Metric, SdrError, SetView};
/// let (a, b) = ([1.0, 0.0, 0.0, 1.0], [1.0, 1.0]);
/// let (a, b) = (SetView::new(&a, 2), SetView::new(&b, 2));
/// let stop = AtomicBool::new(false);
/// assert!(evaluate_all_until(&[Metric::Gw { eps: 0.1 }], &a, &b, &stop).is_ok());
/// stop.store(true, Ordering::Relaxed); // as another thread would
/// let stopped = evaluate_all_until(&[Metric::Gw { eps: 0.1 }], &a, &b, &stop);
/// assert_eq!(stopped, Err(SdrError::Stopped));
/// ```
pub fn evaluate_all_until<T: Element>(
    metrics: &[Metric],
    a: &SetView<'_, T>,
    b: &SetView<'_, T>,
    stop: &AtomicBool,
) -> Result<Vec<Evaluation>> {
    evaluate_all_with(metrics, a, b, Stop::on(stop))
}

fn evaluate_all_with<T: Element>(
    metrics: &[Metric],
    a: &SetView<'_, T>,
    b: &SetView<'_, T>,
    stop: Stop<'_>,
) -> Result<Vec<Evaluation>> {
    stop.check()?;
    let cost = PairCost::between(a, b, metrics.iter().any(Metric::needs_intra))?;
    metrics
        .iter()
        .map(|m| m.evaluate_with(&cost, stop))
        .collect()
}

fn bad(metric: &str, message: impl Into<String>) -> SdrError {
    SdrError::BadMetricParameter {
        metric: metric.to_string(),
        message: message.into(),
    }
}

fn number(spec: &str, key: &str, v: &str) -> Result<f64> {
    v.parse()
        .map_err(|_| bad(spec, format!("`{key}={v}` is not a number")))
}

fn in_range(spec: &str, key: &str, v: &str, range: (f64, f64)) -> Result<f64> {
    let x = number(spec, key, v)?;
    check_range(spec, key, x, range)?;
    Ok(x)
}

fn eps_param(spec: &str, key: &str, v: &str) -> Result<f64> {
    in_range(spec, key, v, EPS_RANGE)
}

fn tau_param(spec: &str, key: &str, v: &str) -> Result<f64> {
    in_range(spec, key, v, TAU_RANGE)
}

fn alpha_param(spec: &str, key: &str, v: &str) -> Result<f64> {
    in_range(spec, key, v, ALPHA_RANGE)
}

/// `adaptive` or a mass in `(0, 1]`.
fn rho_param(spec: &str, key: &str, v: &str) -> Result<Rho> {
    if v == "adaptive" {
        return Ok(Rho::Adaptive);
    }
    let r = number(spec, key, v)?;
    // One message for the whole range: 0, negatives, NaN and > 1 alike.
    if !(r > 0.0 && r <= 1.0) {
        return Err(bad(
            spec,
            format!("`{key}` must be `adaptive` or in (0, 1], got {v}"),
        ));
    }
    Ok(Rho::Fixed(r))
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
        let allowed =
            Metric::keys(name).ok_or_else(|| SdrError::UnknownMetric(spec.to_string()))?;
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
        Metric::build(spec, name, &kv)
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
        assert!(e("sinkhorn:eps=-1").contains("must be in [0.001, 1000], got -1"));
        assert!(e("sinkhorn:eps=abc").contains("not a number"));
        // Outside the ranges the solvers cannot serve: an error naming them.
        for (spec, want) in [
            (
                "sinkhorn:eps=1e-30",
                "`eps` must be in [0.001, 1000], got 1e-30",
            ),
            ("gw:eps=1e-300", "`eps` must be in [0.001, 1000]"),
            ("uot:eps=1e308,tau=1", "`eps` must be in [0.001, 1000]"),
            ("uot:eps=0.1,tau=1e308", "`tau` must be in [0.001, 1000]"),
            ("hung-pen:alpha=1e308", "`alpha` must be in [0, 1000]"),
            ("hung-pen:alpha=nan", "`alpha` must be in [0, 1000]"),
        ] {
            assert!(e(spec).contains(want), "{spec}: {}", e(spec));
        }
        for ok in [
            "sinkhorn:eps=0.001",
            "gw:eps=1000",
            "uot:eps=0.001,tau=1000",
            "hung-pen:alpha=0",
        ] {
            assert!(ok.parse::<Metric>().is_ok(), "{ok}");
        }
        for bad in [
            "pot:rho=1.5",
            "pot:rho=0",
            "pot:rho=-1",
            "pot:rho=nan",
            "pot:rho=inf",
        ] {
            assert!(
                e(bad).contains("`rho` must be `adaptive` or in (0, 1], got"),
                "{bad}: {}",
                e(bad)
            );
        }
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
            // Built in code past the parser's ranges: refused all the same.
            Metric::Sinkhorn { eps: 1e-30 },
            Metric::Gw { eps: 1e-12 },
            Metric::Uot {
                eps: 0.1,
                tau: 1e300,
            },
            Metric::HungPen { alpha: 1e308 },
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
