//! CRC-32C (Castagnoli), the checksum of TFRecord framing, in plain Rust so it runs in the
//! browser too. A 256-entry table built at compile time: event files are small, so a byte at
//! a time is fast enough, and nothing platform-specific is needed.

/// The reflected Castagnoli polynomial.
const POLYNOMIAL: u32 = 0x82f6_3b78;

/// TFRecord's mask constant: a CRC is stored masked, so that the CRC of data that itself holds
/// CRCs (a record inside a record) stays well distributed.
const MASK_DELTA: u32 = 0xa282_ead8;

const TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = byte as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ POLYNOMIAL } else { crc >> 1 };
            bit += 1;
        }
        table[byte] = crc;
        byte += 1;
    }
    table
};

pub fn crc32c(data: &[u8]) -> u32 {
    !data.iter().fold(!0u32, |crc, &b| TABLE[((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8))
}

/// The CRC as TFRecord stores it.
pub fn masked_crc32c(data: &[u8]) -> u32 {
    crc32c(data).rotate_right(15).wrapping_add(MASK_DELTA)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_standard_check_values() {
        // The usual "123456789" check value and RFC 3720's test vectors.
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62a8_ab43);
        let ascending: Vec<u8> = (0..32).collect();
        assert_eq!(crc32c(&ascending), 0x46dd_794e);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn masked_values_match_tensorboards_own() {
        // From tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c.
        assert_eq!(masked_crc32c(b"123456789"), 0xc78a_b0e5);
        assert_eq!(masked_crc32c(&0u64.to_le_bytes()), 0x0798_0329);
        assert_eq!(masked_crc32c(&24u64.to_le_bytes()), 0x224b_7fa3);
    }
}
