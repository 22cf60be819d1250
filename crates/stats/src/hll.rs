//! HyperLogLog (Flajolet, Fusy, Gandouet, Meunier 2007) at a fixed precision of 12 bits:
//! 4,096 one-byte registers, a standard error of about 1.04 / √4096 ≈ 1.6%. Sketches merge by
//! taking the larger register, so a day's sketch is the merge of its runs' sketches and a
//! report's unique users the merge of its line items' days.
//!
//! Serialised form (stored as a BLOB), chosen per sketch by size:
//!
//! | byte | meaning |
//! |---|---|
//! | 0 | format: `1` sparse, `2` dense |
//! | 1 | precision: `12` |
//! | 2.. | sparse: `(register u16 LE, value u8)` for each non-zero register, ascending; dense: the 4,096 registers |

/// Bits of the hash that pick a register.
pub const PRECISION: u8 = 12;
/// Number of registers.
pub const REGISTERS: usize = 1 << PRECISION;

const SPARSE: u8 = 1;
const DENSE: u8 = 2;
const HEADER: usize = 2;
const SPARSE_ENTRY: usize = 3;

/// A HyperLogLog sketch of 64-bit keys.
#[derive(Clone, PartialEq, Eq)]
pub struct Hll {
    registers: Box<[u8; REGISTERS]>,
}

impl std::fmt::Debug for Hll {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hll")
            .field("non_zero", &self.non_zero())
            .field("estimate", &self.estimate())
            .finish()
    }
}

impl Default for Hll {
    fn default() -> Self {
        Hll {
            registers: Box::new([0; REGISTERS]),
        }
    }
}

/// Why stored bytes are not a sketch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SketchError {
    #[error("sketch of {0} bytes is too short")]
    Short(usize),
    #[error("sketch format {0} is unknown")]
    Format(u8),
    #[error("sketch precision {0} is not {PRECISION}")]
    Precision(u8),
    #[error("sketch of {len} bytes does not fit its format")]
    Length { len: usize },
    #[error("sketch register {index} is out of range or holds {value}")]
    Register { index: usize, value: u8 },
}

/// The largest value a register can hold: the rank of a zero remainder.
const MAX_RANK: u8 = 64 - PRECISION + 1;

/// Spreads a key's bits (the 64-bit finaliser of MurmurHash3), so that user keys that are
/// not uniform hashes (small ids in tests) still fill registers evenly.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

impl Hll {
    pub fn new() -> Hll {
        Hll::default()
    }

    /// Adds a key; returns whether a register grew (the estimate may have changed).
    pub fn insert(&mut self, key: u64) -> bool {
        let hash = mix(key);
        let index = (hash >> (64 - PRECISION)) as usize;
        let rest = hash << PRECISION;
        // Leading zeros of the remaining 52 bits, plus one; a zero remainder has the top rank.
        let rank = (rest.leading_zeros() as u8 + 1).min(MAX_RANK);
        let register = &mut self.registers[index];
        if rank > *register {
            *register = rank;
            return true;
        }
        false
    }

    /// Takes the larger of each register; returns whether any register grew.
    pub fn merge(&mut self, other: &Hll) -> bool {
        let mut grew = false;
        for (mine, theirs) in self.registers.iter_mut().zip(other.registers.iter()) {
            if *theirs > *mine {
                *mine = *theirs;
                grew = true;
            }
        }
        grew
    }

    /// The estimated number of distinct keys, with the linear-counting correction for small
    /// cardinalities (a 64-bit hash needs no large-range correction).
    pub fn estimate(&self) -> u64 {
        let m = REGISTERS as f64;
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let mut sum = 0.0;
        let mut zeros = 0usize;
        for &r in self.registers.iter() {
            sum += f64::powi(2.0, -i32::from(r));
            if r == 0 {
                zeros += 1;
            }
        }
        let raw = alpha * m * m / sum;
        let estimate = if raw <= 2.5 * m && zeros > 0 {
            m * (m / zeros as f64).ln()
        } else {
            raw
        };
        estimate.round() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.registers.iter().all(|&r| r == 0)
    }

    fn non_zero(&self) -> usize {
        self.registers.iter().filter(|&&r| r != 0).count()
    }

    /// The stored form: sparse while that is smaller, dense otherwise.
    pub fn to_bytes(&self) -> Vec<u8> {
        let non_zero = self.non_zero();
        if non_zero * SPARSE_ENTRY < REGISTERS {
            let mut out = Vec::with_capacity(HEADER + non_zero * SPARSE_ENTRY);
            out.extend_from_slice(&[SPARSE, PRECISION]);
            for (index, &value) in self.registers.iter().enumerate() {
                if value != 0 {
                    // index < 4096, so it fits a u16.
                    out.extend_from_slice(&(index as u16).to_le_bytes());
                    out.push(value);
                }
            }
            return out;
        }
        let mut out = Vec::with_capacity(HEADER + REGISTERS);
        out.extend_from_slice(&[DENSE, PRECISION]);
        out.extend_from_slice(&self.registers[..]);
        out
    }

    /// Reads the stored form, checking every register.
    pub fn from_bytes(bytes: &[u8]) -> Result<Hll, SketchError> {
        let [format, precision, body @ ..] = bytes else {
            return Err(SketchError::Short(bytes.len()));
        };
        if *precision != PRECISION {
            return Err(SketchError::Precision(*precision));
        }
        let mut hll = Hll::new();
        let check = |index: usize, value: u8| {
            if index >= REGISTERS || value > MAX_RANK {
                return Err(SketchError::Register { index, value });
            }
            Ok(())
        };
        match *format {
            SPARSE => {
                if !body.len().is_multiple_of(SPARSE_ENTRY) {
                    return Err(SketchError::Length { len: bytes.len() });
                }
                for entry in body.chunks_exact(SPARSE_ENTRY) {
                    let index = usize::from(u16::from_le_bytes([entry[0], entry[1]]));
                    check(index, entry[2])?;
                    hll.registers[index] = entry[2];
                }
            }
            DENSE => {
                if body.len() != REGISTERS {
                    return Err(SketchError::Length { len: bytes.len() });
                }
                for (index, &value) in body.iter().enumerate() {
                    check(index, value)?;
                    hll.registers[index] = value;
                }
            }
            other => return Err(SketchError::Format(other)),
        }
        Ok(hll)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(from: u64, to: u64) -> Hll {
        let mut hll = Hll::new();
        for key in from..to {
            hll.insert(key);
        }
        hll
    }

    fn within(estimate: u64, truth: u64, tolerance: f64) -> bool {
        (estimate as f64 - truth as f64).abs() <= truth as f64 * tolerance
    }

    #[test]
    fn estimates_are_close_across_cardinalities() {
        for truth in [1u64, 10, 100, 1_000, 10_000, 100_000, 1_000_000] {
            let estimate = filled(0, truth).estimate();
            // Four standard errors (1.6% each) at worst; exact-ish while linear counting holds.
            assert!(
                within(estimate, truth, 0.065) || estimate.abs_diff(truth) <= 1,
                "{truth} estimated as {estimate}"
            );
        }
        assert_eq!(Hll::new().estimate(), 0);
    }

    #[test]
    fn repeats_do_not_count_and_merging_is_a_union() {
        let mut a = filled(0, 5_000);
        assert!(!a.insert(17), "a key seen before changes nothing");
        let b = filled(2_500, 7_500);
        let mut union = a.clone();
        assert!(union.merge(&b));
        assert!(within(union.estimate(), 7_500, 0.05), "{:?}", union);
        assert!(!union.merge(&a), "merging a subset changes nothing");
        a.merge(&filled(0, 0));
        assert_eq!(a, filled(0, 5_000));
    }

    #[test]
    fn stored_forms_round_trip_sparse_and_dense() {
        for truth in [0u64, 3, 500, 50_000] {
            let hll = filled(0, truth);
            let bytes = hll.to_bytes();
            let expected_format = if truth < 1_000 { SPARSE } else { DENSE };
            assert_eq!(bytes[0], expected_format, "{truth}");
            assert_eq!(Hll::from_bytes(&bytes).unwrap(), hll);
        }
    }

    #[test]
    fn damaged_bytes_are_typed_errors() {
        assert_eq!(Hll::from_bytes(&[1]), Err(SketchError::Short(1)));
        assert_eq!(Hll::from_bytes(&[9, 12]), Err(SketchError::Format(9)));
        assert_eq!(Hll::from_bytes(&[1, 14]), Err(SketchError::Precision(14)));
        assert_eq!(
            Hll::from_bytes(&[1, 12, 0]),
            Err(SketchError::Length { len: 3 })
        );
        assert_eq!(
            Hll::from_bytes(&[1, 12, 0xFF, 0xFF, 1]),
            Err(SketchError::Register {
                index: 0xFFFF,
                value: 1
            })
        );
        assert_eq!(
            Hll::from_bytes(&[1, 12, 0, 0, 99]),
            Err(SketchError::Register {
                index: 0,
                value: 99
            })
        );
        assert_eq!(
            Hll::from_bytes(&[2, 12, 0]),
            Err(SketchError::Length { len: 3 })
        );
    }
}
