//! The text grammar of shapes, the one place it is parsed, from flags or a bench plan alike:
//! input shapes (`-1 3 224 224`, `1x3x224x224`, `input:1x3x224x224`), named-axis settings
//! (`seq=128`, `seq=64,128`, `seq=16:128:512`) and trtexec's `name:1x3x224x224[,…]`.

use super::request::{DimRange, DimSpec, DimValues, InputShape, NamedShape};
use anyhow::{bail, Context, Result};

fn parse_dim(token: &str) -> Result<DimSpec> {
    match token.trim().parse::<i64>() {
        Ok(-1) => Ok(DimSpec::Dynamic),
        Ok(n) if n > 0 => Ok(DimSpec::Fixed(n)),
        _ => bail!("'{token}' is not a dimension (a positive integer, or -1 for dynamic)"),
    }
}

fn parse_dims(text: &str) -> Result<Vec<DimSpec>> {
    if text.is_empty() {
        bail!("empty shape");
    }
    text.split(['x', 'X', ',']).map(parse_dim).collect()
}

/// Parses the values given to `--input-shape` (all occurrences, in order).
pub fn parse_input_shapes(tokens: &[String]) -> Result<Vec<InputShape>> {
    parse_shape_tokens(tokens).with_context(|| format!("--input-shape {}", tokens.join(" ")))
}

/// [`parse_input_shapes`] with errors that name no flag, for shapes written elsewhere (a
/// workspace's `input_shape`).
pub(crate) fn parse_shape_tokens(tokens: &[String]) -> Result<Vec<InputShape>> {
    let parse = || -> Result<Vec<InputShape>> {
        if tokens.is_empty() {
            return Ok(vec![]);
        }
        if tokens.iter().any(|t| t.contains(':')) {
            return tokens
                .iter()
                .map(|t| {
                    let Some((name, dims)) = t.rsplit_once(':') else {
                        bail!("'{t}': mix of named (name:1x3x224x224) and unnamed shapes");
                    };
                    if name.is_empty() {
                        bail!("'{t}': the input name before ':' is empty");
                    }
                    Ok(InputShape {
                        name: Some(name.to_string()),
                        dims: parse_dims(dims)?,
                    })
                })
                .collect();
        }
        let dims = if tokens.len() == 1 {
            parse_dims(&tokens[0])?
        } else {
            tokens.iter().map(|t| parse_dim(t)).collect::<Result<_>>()?
        };
        Ok(vec![InputShape { name: None, dims }])
    };
    parse()
}

fn parse_size(token: &str) -> Result<i64> {
    match token.trim().parse::<i64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => bail!("'{token}' is not a size (a positive integer)"),
    }
}

/// Parses named-axis settings: `seq=128`, `seq=64,128,256` (sizes to sweep) or `seq=16:128:512`
/// (min:opt:max). A symbol given twice is refused.
pub fn parse_dim_ranges(tokens: &[String]) -> Result<Vec<DimRange>> {
    let mut out: Vec<DimRange> = Vec::new();
    for t in tokens {
        let parsed = (|| -> Result<DimRange> {
            let Some((symbol, values)) = t.split_once('=') else {
                bail!("expected NAME=SIZE, NAME=S1,S2,… or NAME=MIN:OPT:MAX");
            };
            let symbol = symbol.trim();
            if symbol.is_empty() {
                bail!("the axis name before '=' is empty");
            }
            let values = if values.contains(':') {
                let parts: Vec<i64> = values.split(':').map(parse_size).collect::<Result<_>>()?;
                let [min, opt, max] = parts[..] else {
                    bail!("a range is MIN:OPT:MAX, three sizes");
                };
                if !(min <= opt && opt <= max) {
                    bail!("needs min ≤ opt ≤ max");
                }
                DimValues::Range { min, opt, max }
            } else {
                DimValues::Sizes(values.split(',').map(parse_size).collect::<Result<_>>()?)
            };
            Ok(DimRange {
                symbol: symbol.to_string(),
                values,
            })
        })()
        .with_context(|| format!("dim '{t}'"))?;
        if out.iter().any(|d| d.symbol == parsed.symbol) {
            bail!("dim '{t}': axis '{}' is given twice", parsed.symbol);
        }
        out.push(parsed);
    }
    Ok(out)
}

/// Parses trtexec's `name:1x3x224x224[,name2:…]` (occurrences may also be repeated).
pub fn parse_named_shapes(flag: &str, values: &[String]) -> Result<Vec<NamedShape>> {
    let mut out = Vec::new();
    for item in values.iter().flat_map(|v| v.split(',')) {
        let item = item.trim();
        let Some((name, dims)) = item.rsplit_once(':') else {
            bail!("{flag} {item}: expected name:dims, e.g. input:1x3x224x224");
        };
        if name.is_empty() {
            bail!("{flag} {item}: the input name before ':' is empty");
        }
        let dims = dims
            .split(['x', 'X'])
            .map(|d| match d.trim().parse::<i64>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => bail!("{flag} {item}: '{d}' is not a dimension (a positive integer)"),
            })
            .collect::<Result<Vec<_>>>()?;
        out.push(NamedShape {
            name: name.trim_matches('\'').to_string(),
            dims,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_all_three_forms() {
        let s = parse_input_shapes(&toks("-1 3 224 224")).unwrap();
        assert_eq!(
            s[0].dims,
            vec![
                DimSpec::Dynamic,
                DimSpec::Fixed(3),
                DimSpec::Fixed(224),
                DimSpec::Fixed(224)
            ]
        );
        assert_eq!(s[0].name, None);
        let s = parse_input_shapes(&toks("32x3x224x224")).unwrap();
        assert_eq!(s[0].dims[0], DimSpec::Fixed(32));
        let s = parse_input_shapes(&toks("a:1x3 b:-1x4")).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].name.as_deref(), Some("b"));
        assert_eq!(s[1].dims, vec![DimSpec::Dynamic, DimSpec::Fixed(4)]);
        assert_eq!(s[1].to_string(), "b:-1x4");
    }

    #[test]
    fn rejects_bad_dims() {
        for bad in ["0 3", "-2 3", "a 3", "x:", ":1x3", "1x3 x:4"] {
            let err = parse_input_shapes(&toks(bad)).unwrap_err();
            assert!(
                format!("{err:#}").contains("--input-shape"),
                "{bad}: {err:#}"
            );
        }
    }
    #[test]
    fn named_shapes_parse_lists_and_refuse_garbage() {
        let s = parse_named_shapes("--min-shapes", &["a:1x3,b:2x4".into()]).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].dims, vec![2, 4]);
        for bad in ["1x3", "a:0x3", "a:1xq", ":1x3"] {
            assert!(
                parse_named_shapes("--min-shapes", &[bad.into()]).is_err(),
                "{bad}"
            );
        }
    }
}
