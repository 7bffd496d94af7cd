//! CRC-32C (Castagnoli), the checksum of TFRecord framing, in plain Rust so it runs in the
//! browser too: "slicing by 8", eight 256-entry tables built at compile time, so eight bytes
//! take eight lookups and no loop-carried dependency but one (a byte at a time was a tenth of
//! an import's time).

/// The reflected Castagnoli polynomial.
const POLYNOMIAL: u32 = 0x82f6_3b78;

/// TFRecord's mask constant: a CRC is stored masked, so that the CRC of data that itself holds
/// CRCs (a record inside a record) stays well distributed.
const MASK_DELTA: u32 = 0xa282_ead8;

/// `TABLES[0]` is the byte-at-a-time table; `TABLES[k][b]` is the CRC of byte `b` followed by
/// `k` zero bytes.
const TABLES: [[u32; 256]; 8] = {
    let mut tables = [[0u32; 256]; 8];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = byte as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ POLYNOMIAL } else { crc >> 1 };
            bit += 1;
        }
        tables[0][byte] = crc;
        byte += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut byte = 0;
        while byte < 256 {
            let previous = tables[k - 1][byte];
            tables[k][byte] = (previous >> 8) ^ tables[0][(previous & 0xff) as usize];
            byte += 1;
        }
        k += 1;
    }
    tables
};

pub fn crc32c(data: &[u8]) -> u32 {
    let t = &TABLES;
    let mut crc = !0u32;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let low = crc ^ u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        crc = t[7][(low & 0xff) as usize]
            ^ t[6][((low >> 8) & 0xff) as usize]
            ^ t[5][((low >> 16) & 0xff) as usize]
            ^ t[4][(low >> 24) as usize]
            ^ t[3][c[4] as usize]
            ^ t[2][c[5] as usize]
            ^ t[1][c[6] as usize]
            ^ t[0][c[7] as usize];
    }
    !chunks.remainder().iter().fold(crc, |crc, &b| t[0][((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8))
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
    fn eight_at_a_time_is_one_at_a_time() {
        let bitwise = |data: &[u8]| {
            let mut crc = !0u32;
            for &b in data {
                crc ^= u32::from(b);
                for _ in 0..8 {
                    crc = if crc & 1 == 1 { (crc >> 1) ^ POLYNOMIAL } else { crc >> 1 };
                }
            }
            !crc
        };
        let data: Vec<u8> = (0..300u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for len in 0..data.len() {
            assert_eq!(crc32c(&data[..len]), bitwise(&data[..len]), "{len} bytes");
        }
    }

    #[test]
    fn masked_values_match_tensorboards_own() {
        // From tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c.
        assert_eq!(masked_crc32c(b"123456789"), 0xc78a_b0e5);
        assert_eq!(masked_crc32c(&0u64.to_le_bytes()), 0x0798_0329);
        assert_eq!(masked_crc32c(&24u64.to_le_bytes()), 0x224b_7fa3);
    }
}
