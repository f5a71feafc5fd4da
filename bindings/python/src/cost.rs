//! `sdr_rewards.register_cost`: a sentence cost written in Python, known by
//! name to this process's registry (`sdr_clinical::register_cost`), so that
//! `SDRReward(cost=...)`, the trainer adapters and `sdr_rewards.explain` open
//! it from its spec as they open `clinical`.
//!
//! The Python object keeps the cost's arithmetic; Rust keeps the rest (parsing,
//! the sentence cache, the distances). Its methods are called with the GIL
//! taken from whichever pool thread needs them: every binding that can reach a
//! cost releases the GIL first (`py.detach`), so no pool thread waits on a
//! caller that holds it.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use numpy::{PyArray1, PyArrayMethods};
use pyo3::exceptions::{PyException, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use sdr_core::cost::{CostMatrix, NamedCost, PairCost};
use sdr_core::{Annotation, CostFamily, SdrError, SentenceCost};

/// The factories registered from Python, by name.
static FACTORIES: Mutex<Vec<(&'static str, Py<PyAny>)>> = Mutex::new(Vec::new());

/// The last exception a Python cost raised, with the message the Rust error
/// carries, so that the exception the caller sees can be chained to it.
static FAILURE: Mutex<Option<(String, PyErr)>> = Mutex::new(None);

/// Names and parameter texts live as long as the process (the registry holds
/// `&'static str`); registering a name again reuses its string.
fn intern(s: &str) -> &'static str {
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.iter().find(|n| **n == s) {
        return n;
    }
    let n: &'static str = Box::leak(s.to_string().into_boxed_str());
    names.push(n);
    n
}

/// `register_cost(name, factory, params="")`; see `sdr_rewards.costs`.
#[pyfunction]
#[pyo3(name = "_register_cost", signature = (name, factory, params = ""))]
pub fn register_cost(py: Python<'_>, name: &str, factory: Py<PyAny>, params: &str) -> PyResult<()> {
    if !factory.bind(py).is_callable() {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "register_cost({name:?}): the factory must be callable (a class, or a function \
             returning an object with apply(cost, a, b))"
        )));
    }
    let name = intern(name.trim());
    let family = CostFamily {
        name,
        params: intern(params.trim()),
        check: |spec| instance(spec).map(|_| spec.as_str().to_string()),
        open: |spec| {
            let obj = instance(spec)?;
            let annotates = Python::attach(|py| obj.bind(py).hasattr("annotate").unwrap_or(false));
            Ok(Arc::new(PyCost {
                spec: spec.as_str().to_string(),
                obj,
                annotates,
            }) as Arc<dyn SentenceCost>)
        },
    };
    // The registry refuses built-in names and names that are not cost names;
    // the factory is stored only once the name is accepted.
    {
        let mut f = FACTORIES.lock().unwrap_or_else(|e| e.into_inner());
        f.retain(|(n, _)| *n != name);
        f.push((name, factory));
    }
    sdr_clinical::register_cost(family).map_err(|e| {
        FACTORIES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(n, _)| *n != name);
        PyValueError::new_err(e.to_string())
    })
}

/// The cost object of a spec: its factory called with the spec's parameters
/// as keyword strings, checked to have a callable `apply`.
fn instance(spec: &NamedCost) -> Result<Py<PyAny>, String> {
    Python::attach(|py| {
        let factory = FACTORIES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(n, _)| *n == spec.name())
            .map(|(_, f)| f.clone_ref(py))
            .ok_or_else(|| format!("no Python factory registered for `{}`", spec.name()))?;
        let kwargs = PyDict::new(py);
        for (k, v) in spec.params() {
            kwargs.set_item(k, v).map_err(|e| e.to_string())?;
        }
        let obj = factory
            .call(py, (), Some(&kwargs))
            .map_err(|e| format!("{}: {}", call_text(py, &factory, spec), one_line(py, &e)))?;
        let apply = obj.bind(py).getattr("apply").ok();
        if !apply.is_some_and(|a| a.is_callable()) {
            return Err(format!(
                "{} returned an object without a callable apply(cost, a, b)",
                call_text(py, &factory, spec)
            ));
        }
        Ok(obj)
    })
}

/// `Negation(weight='0.5')`, as errors name a factory's call.
fn call_text(py: Python<'_>, factory: &Py<PyAny>, spec: &NamedCost) -> String {
    let name = crate::reward::callable_name(factory.bind(py));
    let args: Vec<String> = spec.params().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{name}({})", args.join(", "))
}

/// An exception as one line: its type and message.
fn one_line(py: Python<'_>, e: &PyErr) -> String {
    let ty = e
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into());
    let text = e.value(py).to_string();
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.is_empty() {
        ty
    } else {
        format!("{ty}: {text}")
    }
}

/// A sentence cost whose `annotate` and `apply` are a Python object's.
struct PyCost {
    spec: String,
    obj: Py<PyAny>,
    /// Whether the object has `annotate`; without it a sentence's annotation
    /// is its text.
    annotates: bool,
}

impl std::fmt::Debug for PyCost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PyCost").field("spec", &self.spec).finish()
    }
}

/// A sentence's annotation: what `annotate` returned, or how it failed
/// (reported by `apply`, which can return an error).
enum Note {
    Value(Py<PyAny>),
    /// The error's text and the exception (a cached note fails every call).
    Failed(String, PyErr),
}

impl PyCost {
    fn bad(&self, message: String) -> SdrError {
        SdrError::BadCost {
            spec: self.spec.clone(),
            message,
        }
    }

    /// The message for an exception the object raised; the exception is kept
    /// for [`chain`].
    fn raised(&self, message: &str, e: PyErr) -> SdrError {
        let err = self.bad(message.to_string());
        *FAILURE.lock().unwrap_or_else(|e| e.into_inner()) = Some((err.to_string(), e));
        err
    }

    /// The Python values of one set's annotations.
    fn values<'py>(
        &self,
        py: Python<'py>,
        notes: &[Annotation],
    ) -> Result<Bound<'py, PyList>, SdrError> {
        let mut out = Vec::with_capacity(notes.len());
        for n in notes {
            match n.downcast_ref::<Note>() {
                Some(Note::Value(v)) => out.push(v.clone_ref(py)),
                Some(Note::Failed(why, e)) => return Err(self.raised(why, e.clone_ref(py))),
                None => return Err(self.bad("an annotation that is not this cost's".into())),
            }
        }
        PyList::new(py, out).map_err(|e| self.bad(e.to_string()))
    }

    /// `apply`'s result as an `n x m` cost matrix: finite values >= 0.
    fn matrix(&self, value: &Bound<'_, PyAny>, n: usize, m: usize) -> Result<Vec<f64>, String> {
        if value.is_none() {
            return Err(format!(
                "apply returned None; expected a ({n}, {m}) float array"
            ));
        }
        let (data, _) = crate::reward::real_rows::<f64>(value, "apply returned", |shape| {
            if shape != [n, m] {
                return Err(format!(
                    "apply returned shape {shape:?}; expected [{n}, {m}] (rows: the first set's \
                     sentences, columns: the second's)"
                ));
            }
            Ok(())
        })?;
        if let Some(k) = data.iter().position(|v| !(v.is_finite() && *v >= 0.0)) {
            return Err(format!(
                "apply returned {} at [{}, {}]; a cost must be finite and >= 0",
                data[k],
                k / m,
                k % m
            ));
        }
        Ok(data)
    }
}

impl SentenceCost for PyCost {
    fn spec(&self) -> String {
        self.spec.clone()
    }

    fn annotate(&self, sentence: &str) -> Annotation {
        let note = Python::attach(|py| {
            if !self.annotates {
                return Note::Value(pyo3::types::PyString::new(py, sentence).into_any().unbind());
            }
            match self.obj.call_method1(py, "annotate", (sentence,)) {
                Ok(v) => Note::Value(v),
                Err(e) => Note::Failed(
                    format!("annotate({sentence:?}) raised {}", one_line(py, &e)),
                    e,
                ),
            }
        });
        Arc::new(note)
    }

    fn apply<'a>(
        &self,
        cosine: PairCost<'a>,
        a: &[Annotation],
        b: &[Annotation],
    ) -> sdr_core::Result<(PairCost<'a>, bool)> {
        let (n, m) = (cosine.cross.n(), cosine.cross.m());
        if (a.len(), b.len()) != (n, m) {
            return Err(self.bad(format!(
                "{} x {} annotations for a {n} x {m} cost matrix",
                a.len(),
                b.len()
            )));
        }
        let data = Python::attach(|py| {
            let (va, vb) = (self.values(py, a)?, self.values(py, b)?);
            let cost = PyArray1::from_slice(py, cosine.cross.data())
                .reshape([n, m])
                .map_err(|e| self.bad(e.to_string()))?;
            let out = self
                .obj
                .call_method1(py, "apply", (cost, va, vb))
                .map_err(|e| {
                    let message = format!("apply raised {}", one_line(py, &e));
                    self.raised(&message, e)
                })?;
            self.matrix(out.bind(py), n, m).map_err(|m| self.bad(m))
        })?;
        let changed = data
            .iter()
            .zip(cosine.cross.data())
            .any(|(x, y)| x.to_bits() != y.to_bits());
        Ok((
            PairCost {
                cross: Cow::Owned(CostMatrix::new(n, m, data)),
                intra: cosine.intra,
            },
            changed,
        ))
    }
}

/// `err`, an error of a call that may have run a Python cost: when that
/// cost's exception caused it, a `RuntimeError` chained to the exception (or
/// the exception itself when it is not an `Exception`, e.g.
/// KeyboardInterrupt); otherwise `err` unchanged.
pub(crate) fn chain(py: Python<'_>, err: PyErr) -> PyErr {
    let mut failure = FAILURE.lock().unwrap_or_else(|e| e.into_inner());
    let message = err.value(py).to_string();
    match failure.take() {
        Some((text, cause)) if message.contains(&text) => {
            if !cause.is_instance_of::<PyException>(py) {
                return cause;
            }
            let e = PyRuntimeError::new_err(message);
            e.set_cause(py, Some(cause));
            e
        }
        other => {
            *failure = other;
            err
        }
    }
}
