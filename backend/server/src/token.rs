//! A secret shared by the server and whoever it hands a link to: the instructor's and the
//! viewer's tokens, a class's follower token. Made from the operating system's randomness,
//! compared in constant time, never shown by `Debug`.

use sha2::{Digest, Sha256};

use crate::Error;

/// A secret shared by the server and the page it prints the URL of.
#[derive(Clone)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// 32 random bytes from the operating system, as 64 hex digits.
    pub fn generate() -> Result<Token, Error> {
        Token::random::<32>()
    }

    /// `N` random bytes from the operating system, as `2N` hex digits.
    pub fn random<const N: usize>() -> Result<Token, Error> {
        let mut bytes = [0u8; N];
        getrandom::fill(&mut bytes).map_err(|e| Error::Io(std::io::Error::other(e.to_string())))?;
        Ok(Token(hex(&bytes)))
    }

    /// The viewer token that goes with this instructor token: the first 128 bits of SHA-256
    /// over a fixed prefix and this token, as 32 hex digits. The same instructor token always
    /// gives the same viewer link (so a fixed `SCALEBOOK_TOKEN` keeps both links across
    /// restarts), and the hash cannot be turned back into the instructor's token. The prefix
    /// keeps this hash from equalling any other use of SHA-256 over the token.
    pub fn viewer(&self) -> Token {
        let digest = Sha256::new().chain_update(VIEWER_DERIVATION).chain_update(self.0.as_bytes()).finalize();
        Token::from_digest(&digest[..16])
    }

    /// A token derived from another by a one-way hash: `digest`'s bytes as hex digits.
    pub fn from_digest(digest: &[u8]) -> Token {
        Token(hex(digest))
    }

    /// A token chosen by the user (`--token`), which must be usable in a URL as is.
    pub fn given(text: &str) -> Result<Token, Error> {
        let url_safe = text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if url_safe && (16..=256).contains(&text.len()) { Ok(Token(text.to_owned())) } else { Err(Error::BadToken) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Compares in time independent of where the first difference is, so the token cannot be
    /// guessed one character at a time from response times.
    pub fn matches(&self, presented: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), presented.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// What the viewer token is hashed from, before the instructor's token (see [`Token::viewer`]).
const VIEWER_DERIVATION: &[u8] = b"scalebook viewer token v1\0";

/// `bytes` as lowercase hex digits, two a byte.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
