//! A sweep as a chapter writes it: the variants of one config to run side by side, one a line,
//! `Label | dp=2 key=value …`. The browser's sweep block runs them; the chapter tests check
//! that every variant the chapters list is a run the server would accept.

/// One run of the sweep: `Label | dp=2 key=value …` in the block's body.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    pub label: String,
    pub dp: u32,
    /// Config overrides, `key=value`, as the config editor makes them.
    pub overrides: Vec<String>,
}

/// The variants, one a line; at least two, since a sweep compares.
pub fn parse_variants(body: &str) -> Result<Vec<Variant>, String> {
    let variants = body.lines().filter(|l| !l.trim().is_empty()).map(parse_variant).collect::<Result<Vec<_>, _>>()?;
    if variants.len() < 2 {
        return Err("a sweep block lists at least two variants, one a line: `Label | dp=2 key=value …`".into());
    }
    Ok(variants)
}

fn parse_variant(line: &str) -> Result<Variant, String> {
    let (label, settings) = line.split_once('|').ok_or_else(|| format!("`{}`: a variant is `Label | dp=2 key=value …`", line.trim()))?;
    let label = label.trim();
    if label.is_empty() {
        return Err(format!("`{}`: the variant needs a label before `|`", line.trim()));
    }
    let mut variant = Variant { label: label.to_owned(), dp: 1, overrides: Vec::new() };
    for word in settings.split_whitespace() {
        let (key, value) = word.split_once('=').ok_or_else(|| format!("`{word}` in variant `{label}` is not key=value"))?;
        match key {
            "dp" => {
                variant.dp = value
                    .parse()
                    .ok()
                    .filter(|&dp| dp >= 1)
                    .ok_or_else(|| format!("dp={value} in variant `{label}`: dp is a whole number ≥ 1"))?;
            }
            _ => variant.overrides.push(word.to_owned()),
        }
    }
    Ok(variant)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_are_label_bar_settings_lines() {
        let v = parse_variants("DDP | dp=2\n\n no DDP | dp=2 noddp=true\nOne rank | local_batch_size=8\n").unwrap();
        assert_eq!(v[0], Variant { label: "DDP".into(), dp: 2, overrides: vec![] });
        assert_eq!(v[1], Variant { label: "no DDP".into(), dp: 2, overrides: vec!["noddp=true".into()] });
        assert_eq!(v[2], Variant { label: "One rank".into(), dp: 1, overrides: vec!["local_batch_size=8".into()] });
        assert!(parse_variants("only | dp=1").unwrap_err().contains("at least two"));
        assert!(parse_variants("a dp=1\nb | dp=2").unwrap_err().contains("`a dp=1`"));
        assert!(parse_variants("a | dp=0\nb | dp=2").unwrap_err().contains("dp=0"));
        assert!(parse_variants("a | noddp\nb | dp=2").unwrap_err().contains("`noddp`"));
        assert!(parse_variants(" | dp=1\nb | dp=2").unwrap_err().contains("label"));
    }
}
