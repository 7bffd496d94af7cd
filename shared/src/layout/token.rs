//! Tokens: the names of rank groups (`tp`, `tp-cp`, ...), each a set of dimensions.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::dims::Dim;
use crate::Error;

/// A non-empty set of dimensions. Its groups are the ranks that differ only along those
/// dimensions, so the order of names in `tp-cp` is irrelevant: `cp-tp` is the same token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct Token {
    /// Bit `Dim::index()` set for every member; never 0.
    mask: u8,
}

impl Token {
    pub const DP: Token = Token::of(&[Dim::Dp]);
    pub const TP: Token = Token::of(&[Dim::Tp]);
    pub const CP: Token = Token::of(&[Dim::Cp]);
    pub const PP: Token = Token::of(&[Dim::Pp]);
    pub const TP_CP: Token = Token::of(&[Dim::Tp, Dim::Cp]);
    pub const DP_CP: Token = Token::of(&[Dim::Dp, Dim::Cp]);
    pub const TP_PP: Token = Token::of(&[Dim::Tp, Dim::Pp]);
    pub const TP_DP: Token = Token::of(&[Dim::Tp, Dim::Dp]);
    pub const TP_DP_CP: Token = Token::of(&[Dim::Tp, Dim::Dp, Dim::Cp]);

    /// The tokens worth showing: first the six the tutorial builds, in its build order, then
    /// the three extra combinations Megatron-LM builds.
    pub const ALL: [Token; 9] =
        [Token::DP, Token::TP, Token::CP, Token::PP, Token::TP_CP, Token::DP_CP, Token::TP_PP, Token::TP_DP, Token::TP_DP_CP];

    /// Only for the non-empty literal lists above.
    const fn of(dims: &[Dim]) -> Token {
        let mut mask = 0;
        let mut i = 0;
        while i < dims.len() {
            mask |= 1 << dims[i].index();
            i += 1;
        }
        Token { mask }
    }

    /// The token over `dims`, or `None` when there are none.
    pub fn from_dims(dims: impl IntoIterator<Item = Dim>) -> Option<Token> {
        let mask = dims.into_iter().fold(0, |mask, d| mask | 1 << d.index());
        (mask != 0).then_some(Token { mask })
    }

    pub const fn single(dim: Dim) -> Token {
        Token { mask: 1 << dim.index() }
    }

    pub const fn contains(self, dim: Dim) -> bool {
        self.mask & (1 << dim.index()) != 0
    }

    /// Members in canonical order (tp, pp, dp, cp).
    pub fn dims(self) -> impl Iterator<Item = Dim> {
        Dim::ALL.into_iter().filter(move |&d| self.contains(d))
    }

    pub const fn union(self, other: Token) -> Token {
        Token { mask: self.mask | other.mask }
    }

    pub const fn is_disjoint(self, other: Token) -> bool {
        self.mask & other.mask == 0
    }

    /// What the tutorial's training step does over this token's groups, in a few words (for
    /// labels in the rank grid and the CLI table).
    pub fn collective(self) -> &'static str {
        match self {
            Token::TP => "all-reduce of TP activations",
            Token::CP => "all-gather / reduce-scatter of K,V",
            Token::DP => "gradient all-reduce (DDP)",
            Token::TP_CP => "shared-weight init broadcast",
            Token::PP => "point-to-point (not used for training)",
            Token::DP_CP => "built, unused",
            _ => "Megatron-LM only, unused here",
        }
    }
}

/// Honours width and alignment (`{:<9}`), so tokens line up in tables.
impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.dims().map(Dim::name).collect::<Vec<_>>().join("-"))
    }
}

/// Names joined by `-` in any order and any case; each name at most once.
impl FromStr for Token {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parse_error = |message: String| Error::Parse { what: format!("token `{s}`"), message };
        let mut mask = 0u8;
        for part in s.trim().split('-') {
            if part.is_empty() {
                return Err(parse_error("has an empty name; write names joined by `-`, e.g. `tp-cp`".into()));
            }
            let dim: Dim = part.parse().map_err(|e: Error| parse_error(e.to_string()))?;
            let bit = 1 << dim.index();
            if mask & bit != 0 {
                return Err(parse_error(format!("names {dim} twice")));
            }
            mask |= bit;
        }
        Ok(Token { mask })
    }
}

impl From<Token> for String {
    fn from(token: Token) -> String {
        token.to_string()
    }
}

impl TryFrom<String> for Token {
    type Error = Error;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_tokens_have_their_canonical_names_in_order() {
        let names: Vec<String> = Token::ALL.iter().map(Token::to_string).collect();
        assert_eq!(names, ["dp", "tp", "cp", "pp", "tp-cp", "dp-cp", "tp-pp", "tp-dp", "tp-dp-cp"]);
        assert_eq!(format!("[{:<6}]", Token::TP_CP), "[tp-cp ]");
    }

    #[test]
    fn name_order_and_case_are_irrelevant() {
        assert_eq!("cp-tp".parse::<Token>().unwrap(), Token::TP_CP);
        assert_eq!("CP-DP-tp".parse::<Token>().unwrap(), Token::TP_DP_CP);
        assert_eq!("pp-dp".parse::<Token>().unwrap().to_string(), "pp-dp");
        for token in Token::ALL {
            assert_eq!(token.to_string().parse::<Token>().unwrap(), token);
        }
    }

    #[test]
    fn bad_tokens_are_rejected_with_the_reason() {
        for (text, reason) in [("", "empty name"), ("tp-", "empty name"), ("tp-ep", "`ep`"), ("dp-dp", "twice")] {
            let err = text.parse::<Token>().unwrap_err().to_string();
            assert!(err.contains(reason), "{text:?}: {err}");
        }
    }

    #[test]
    fn set_operations() {
        assert_eq!(Token::TP.union(Token::CP), Token::TP_CP);
        assert!(Token::TP.is_disjoint(Token::DP_CP));
        assert!(!Token::TP_DP.is_disjoint(Token::DP_CP));
        assert_eq!(Token::from_dims([Dim::Cp, Dim::Dp]), Some(Token::DP_CP));
        assert_eq!(Token::from_dims([]), None);
        assert_eq!(Token::single(Dim::Pp), Token::PP);
        assert_eq!(Token::TP_DP_CP.dims().collect::<Vec<_>>(), [Dim::Tp, Dim::Dp, Dim::Cp]);
    }

    #[test]
    fn collectives_follow_the_tutorial() {
        assert!(Token::TP.collective().contains("all-reduce"));
        assert!(Token::CP.collective().contains("all-gather"));
        assert!(Token::DP.collective().contains("gradient"));
        assert!(Token::TP_CP.collective().contains("shared-weight"));
        assert!(Token::PP.collective().contains("point-to-point"));
        assert!(Token::DP_CP.collective().contains("unused"));
        assert!(Token::TP_PP.collective().contains("Megatron"));
    }

    #[test]
    fn serialises_as_its_name() {
        assert_eq!(serde_json::to_string(&Token::DP_CP).unwrap(), r#""dp-cp""#);
        assert_eq!(serde_json::from_str::<Token>(r#""cp-dp""#).unwrap(), Token::DP_CP);
        assert!(serde_json::from_str::<Token>(r#""ep""#).is_err());
    }
}
