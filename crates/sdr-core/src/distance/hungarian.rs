//! PLACEHOLDER: being written (rectangular Hungarian).
use crate::cost::CostMatrix;
pub fn hung_nn(_m: &CostMatrix) -> f64 {
    unimplemented!("hung-nn")
}
pub fn hung_pen(_m: &CostMatrix, _alpha: f64) -> f64 {
    unimplemented!("hung-pen")
}
