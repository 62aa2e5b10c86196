//! Kubernetes resource quantities (`500m`, `0.5`, `1Gi`, `1e3`) reduced to an exact canonical
//! value, so that a chart's `cpu: "0.5"` equals the API server's `500m`.

/// The finest precision the API server keeps (`1n`).
const NANO: i32 = -9;

/// A quantity as the API server stores it: `coefficient * 10^exponent`, exact down to `1n`
/// (finer precision is rounded up, as the API server does), normalized (no trailing zeros in
/// the coefficient, zero is `0 * 10^0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quantity {
    coefficient: i128,
    exponent: i32,
}

impl Quantity {
    /// Parses the API server's quantity grammar: sign, decimal number, then either a binary
    /// suffix (`Ki`..`Ei`), a decimal suffix (`n u m k M G T P E`) or an exponent (`e3`, `E-2`).
    /// Returns `None` for anything else (including values too large to hold exactly).
    pub fn parse(text: &str) -> Option<Quantity> {
        let text = text.trim();
        let (negative, rest) = match text.as_bytes().first()? {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        let number_len = rest
            .bytes()
            .position(|b| !(b.is_ascii_digit() || b == b'.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_len);
        let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
        if int_part.is_empty() && frac_part.is_empty() || frac_part.contains('.') {
            return None;
        }
        let mut coefficient: i128 = 0;
        for b in int_part.bytes().chain(frac_part.bytes()) {
            coefficient = coefficient
                .checked_mul(10)?
                .checked_add(i128::from(b - b'0'))?;
        }
        let mut exponent = -i32::try_from(frac_part.len()).ok()?;
        match suffix {
            "" => {}
            "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
                let power = match suffix {
                    "Ki" => 10,
                    "Mi" => 20,
                    "Gi" => 30,
                    "Ti" => 40,
                    "Pi" => 50,
                    _ => 60,
                };
                coefficient = coefficient.checked_mul(1i128 << power)?;
            }
            "n" => exponent -= 9,
            "u" => exponent -= 6,
            "m" => exponent -= 3,
            "k" => exponent += 3,
            "M" => exponent += 6,
            "G" => exponent += 9,
            "T" => exponent += 12,
            "P" => exponent += 15,
            "E" => exponent += 18,
            _ => {
                let digits = suffix.strip_prefix(['e', 'E'])?;
                let e: i32 = digits.parse().ok()?;
                if !(-1000..=1000).contains(&e) {
                    return None;
                }
                exponent += e;
            }
        }
        if negative {
            coefficient = -coefficient;
        }
        Some(Quantity::normalized(coefficient, exponent))
    }

    fn normalized(mut coefficient: i128, mut exponent: i32) -> Quantity {
        if coefficient == 0 {
            return Quantity {
                coefficient: 0,
                exponent: 0,
            };
        }
        if exponent < NANO {
            // The API server keeps nano precision and rounds anything finer up, away from zero
            // ("0.1n" is stored as "1n", "-1.5n" as "-2n").
            let magnitude = coefficient.unsigned_abs();
            let rounded = match 10u128.checked_pow(NANO.abs_diff(exponent)) {
                Some(unit) => magnitude / unit + u128::from(magnitude % unit != 0),
                None => 1,
            };
            coefficient = coefficient.signum() * i128::try_from(rounded).unwrap_or(i128::MAX);
            exponent = NANO;
        }
        while coefficient % 10 == 0 {
            coefficient /= 10;
            exponent += 1;
        }
        Quantity {
            coefficient,
            exponent,
        }
    }

    /// A quantity from a JSON number (charts often write `cpu: 1` or `memory: 512`).
    pub fn from_json(value: &serde_json::Value) -> Option<Quantity> {
        match value {
            serde_json::Value::String(s) => Quantity::parse(s),
            serde_json::Value::Number(n) => Quantity::parse(&n.to_string()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|| panic!("{s} should parse"))
    }

    #[test]
    fn equal_quantities_in_different_spellings() {
        assert_eq!(q("0.5"), q("500m"));
        assert_eq!(q("1Gi"), q("1073741824"));
        assert_eq!(q("1000m"), q("1"));
        assert_eq!(q("1k"), q("1e3"));
        assert_eq!(q("1.5Gi"), q("1536Mi"));
        assert_eq!(q("0"), q("0m"));
        assert_eq!(q("+2"), q("2.000"));
        assert_eq!(q("100Mi"), q("104857600"));
        assert_eq!(q("1E2"), q("100"));
        assert_eq!(q(".5"), q("500m"));
    }

    #[test]
    fn precision_finer_than_nano_rounds_up_as_the_api_server_stores_it() {
        // Found by the property test core/tests/properties.rs against the API server's rules.
        assert_eq!(q("0.1n"), q("1n"));
        assert_eq!(q("1.5n"), q("2n"));
        assert_eq!(q("-1.5n"), q("-2n"));
        assert_eq!(q("0.0000000001"), q("1n"));
        assert_eq!(q("1e-1000"), q("1n"));
        assert_eq!(q("1000000001e-18"), q("2n"));
        assert_ne!(q("1.5n"), q("1n"));
        assert_eq!(q("0e-20"), q("0"));
    }

    #[test]
    fn different_quantities_differ() {
        assert_ne!(q("1Gi"), q("1G"));
        assert_ne!(q("500m"), q("5"));
        assert_ne!(q("-1"), q("1"));
        assert_ne!(q("1Ki"), q("1k"));
    }

    #[test]
    fn non_quantities_are_rejected() {
        for s in [
            "",
            "abc",
            "1.2.3",
            "1Zi",
            "nginx:1.25",
            "1e",
            "e3",
            "-",
            "1 Gi",
            "99999999999999999999999999999999999999999999Ei",
            "1e99999",
        ] {
            assert_eq!(Quantity::parse(s), None, "{s:?}");
        }
    }

    #[test]
    fn json_numbers_are_quantities() {
        assert_eq!(Quantity::from_json(&serde_json::json!(1)), Some(q("1000m")));
        assert_eq!(
            Quantity::from_json(&serde_json::json!(0.25)),
            Some(q("250m"))
        );
        assert_eq!(Quantity::from_json(&serde_json::json!(true)), None);
    }
}
