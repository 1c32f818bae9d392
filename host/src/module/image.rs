//! The header check of cubin and fatbin images.

/// Checks that `image` is a whole 64-bit ELF cubin or a whole fatbin, from the sizes in its
/// header.
pub(crate) fn check_binary_image(image: &[u8]) -> std::result::Result<(), String> {
    let u16_at = |at: usize| image.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as u64);
    let u64_at = |at: usize| image.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    if image.starts_with(b"\x7fELF") {
        // ELF64: the program and section header tables (e_phoff at 0x20 with e_phentsize and
        // e_phnum at 0x36/0x38; e_shoff at 0x28 with e_shentsize and e_shnum at 0x3A/0x3C)
        // must lie inside the image.
        if image.get(4) != Some(&2) {
            return Err("a 32-bit ELF; CUDA cubins are 64-bit".into());
        }
        let tables = [(u64_at(0x20), u16_at(0x36), u16_at(0x38), "program"), (u64_at(0x28), u16_at(0x3A), u16_at(0x3C), "section")];
        for (offset, entry, count, what) in tables {
            let (Some(offset), Some(entry), Some(count)) = (offset, entry, count) else {
                return Err(format!("the ELF header is truncated ({} bytes)", image.len()));
            };
            let end = offset.saturating_add(entry.saturating_mul(count));
            if end > image.len() as u64 {
                return Err(format!("the ELF is truncated: its {what} headers end at byte {end}, the image has {}", image.len()));
            }
        }
        return Ok(());
    }
    const FATBIN_MAGIC: [u8; 4] = 0xBA55_ED50u32.to_le_bytes();
    if image.starts_with(&FATBIN_MAGIC) {
        let (Some(header), Some(size)) = (u16_at(6), u64_at(8)) else {
            return Err(format!("the fatbin header is truncated ({} bytes)", image.len()));
        };
        let end = header.saturating_add(size);
        if end > image.len() as u64 {
            return Err(format!("the fatbin is truncated: it declares {end} bytes, the image has {}", image.len()));
        }
        return Ok(());
    }
    if image.starts_with(b"//") || image.windows(8).take(4096).any(|w| w == b".version") {
        return Err("it looks like PTX text; load it with `Module::load_ptx`".into());
    }
    Err("it is neither a cubin (ELF) nor a fatbin; build one with `ptxas -arch=sm_XX` or `nvcc -fatbin`".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_images_are_checked_against_their_own_sizes() {
        let mut elf = vec![0u8; 0x40];
        elf[..5].copy_from_slice(b"\x7fELF\x02");
        elf[0x28..0x30].copy_from_slice(&0x40u64.to_le_bytes()); // section headers right after
        elf[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        elf[0x3C..0x3E].copy_from_slice(&2u16.to_le_bytes());
        let message = check_binary_image(&elf).unwrap_err();
        assert!(message.contains("section headers end at byte 192, the image has 64"), "{message}");
        elf.resize(192, 0);
        assert_eq!(check_binary_image(&elf), Ok(()));

        let mut fatbin = 0xBA55_ED50u32.to_le_bytes().to_vec();
        fatbin.extend_from_slice(&[1, 0, 16, 0]);
        fatbin.extend_from_slice(&100u64.to_le_bytes());
        assert!(check_binary_image(&fatbin).unwrap_err().contains("declares 116 bytes, the image has 16"));
        fatbin.resize(116, 0);
        assert_eq!(check_binary_image(&fatbin), Ok(()));

        assert!(check_binary_image(b"//\n.version 7.0\n").unwrap_err().contains("load it with `Module::load_ptx`"));
        assert!(check_binary_image(b"not a cubin at all").unwrap_err().contains("neither a cubin (ELF) nor a fatbin"));
    }
}
