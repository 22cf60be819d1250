//! Comparing shared secrets (API-adjacent bearer secrets, CSRF tokens) without leaking through
//! timing how much of a guess was right.

/// Whether `sent` equals `expected`, in time that depends only on the lengths: every byte is
/// compared, with no early exit at the first difference.
pub fn same_secret(sent: &[u8], expected: &[u8]) -> bool {
    sent.len() == expected.len()
        && sent
            .iter()
            .zip(expected)
            .fold(0u8, |difference, (a, b)| difference | (a ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::same_secret;

    #[test]
    fn equal_only_when_every_byte_and_the_length_match() {
        assert!(same_secret(b"s3cret", b"s3cret"));
        assert!(!same_secret(b"s3cres", b"s3cret"));
        assert!(!same_secret(b"t3cret", b"s3cret"));
        assert!(!same_secret(b"s3cre", b"s3cret"));
        assert!(!same_secret(b"s3crett", b"s3cret"));
        assert!(same_secret(b"", b""));
    }
}
