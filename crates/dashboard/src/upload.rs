//! What an uploaded creative image is, read from its bytes rather than its name or the
//! browser's word: the type by its signature, and its width and height from its header.

use marquee_model::Size;

/// An image type the dashboard accepts. No SVG: it can carry script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageType {
    Png,
    Jpeg,
    Gif,
    Webp,
}

impl ImageType {
    /// The type the bytes begin with, if they are one of the four.
    pub fn sniff(bytes: &[u8]) -> Option<ImageType> {
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(ImageType::Png)
        } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(ImageType::Jpeg)
        } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
            Some(ImageType::Gif)
        } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
            Some(ImageType::Webp)
        } else {
            None
        }
    }

    pub fn extension(self) -> &'static str {
        match self {
            ImageType::Png => "png",
            ImageType::Jpeg => "jpg",
            ImageType::Gif => "gif",
            ImageType::Webp => "webp",
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            ImageType::Png => "image/png",
            ImageType::Jpeg => "image/jpeg",
            ImageType::Gif => "image/gif",
            ImageType::Webp => "image/webp",
        }
    }

    /// The image's width and height, when its header holds them.
    pub fn dimensions(self, bytes: &[u8]) -> Option<Size> {
        let le16 = |at: usize| {
            Some(u32::from(u16::from_le_bytes([
                *bytes.get(at)?,
                *bytes.get(at + 1)?,
            ])))
        };
        let le24 = |at: usize| {
            Some(u32::from_le_bytes([
                *bytes.get(at)?,
                *bytes.get(at + 1)?,
                *bytes.get(at + 2)?,
                0,
            ]))
        };
        let be32 = |at: usize| Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
        let (w, h) = match self {
            // The IHDR chunk comes first.
            ImageType::Png if bytes.get(12..16) == Some(b"IHDR") => (be32(16)?, be32(20)?),
            ImageType::Png => return None,
            ImageType::Gif => (le16(6)?, le16(8)?),
            ImageType::Jpeg => return jpeg_dimensions(bytes),
            ImageType::Webp => match bytes.get(12..16)? {
                b"VP8 " => (le16(26)? & 0x3FFF, le16(28)? & 0x3FFF),
                b"VP8L" => {
                    let bits = u32::from_le_bytes(bytes.get(21..25)?.try_into().ok()?);
                    ((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
                }
                b"VP8X" => (le24(24)? + 1, le24(27)? + 1),
                _ => return None,
            },
        };
        (w > 0 && h > 0).then_some(Size { w, h })
    }
}

/// A JPEG's size: the first start-of-frame segment's, walking the segments before it.
fn jpeg_dimensions(bytes: &[u8]) -> Option<Size> {
    let mut at = 2;
    loop {
        // Markers may be padded with extra 0xFF bytes.
        while *bytes.get(at)? == 0xFF && *bytes.get(at + 1)? == 0xFF {
            at += 1;
        }
        if *bytes.get(at)? != 0xFF {
            return None;
        }
        let marker = *bytes.get(at + 1)?;
        let length = usize::from(u16::from_be_bytes([
            *bytes.get(at + 2)?,
            *bytes.get(at + 3)?,
        ]));
        // SOF0..SOF15, except DHT (C4), JPG (C8) and DAC (CC), which share the range.
        if (0xC0..=0xCF).contains(&marker) && !matches!(marker, 0xC4 | 0xC8 | 0xCC) {
            let h = u16::from_be_bytes([*bytes.get(at + 5)?, *bytes.get(at + 6)?]);
            let w = u16::from_be_bytes([*bytes.get(at + 7)?, *bytes.get(at + 8)?]);
            return (w > 0 && h > 0).then_some(Size {
                w: u32::from(w),
                h: u32::from(h),
            });
        }
        if length < 2 {
            return None;
        }
        at += 2 + length;
    }
}

/// How an image's size fits the size a creative declares: exactly, or an exact multiple for
/// high-density screens (600×500 for 300×250).
pub fn fits(image: Size, declared: Size) -> bool {
    declared.w > 0
        && declared.h > 0
        && image.w.is_multiple_of(declared.w)
        && image.h.is_multiple_of(declared.h)
        && image.w / declared.w == image.h / declared.h
        && image.w / declared.w <= 4
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(w: u32, h: u32) -> Vec<u8> {
        let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        bytes.extend(w.to_be_bytes());
        bytes.extend(h.to_be_bytes());
        bytes.extend([8, 6, 0, 0, 0]);
        bytes
    }

    #[test]
    fn reads_the_type_from_the_bytes_not_the_name() {
        assert_eq!(ImageType::sniff(&png(1, 1)), Some(ImageType::Png));
        assert_eq!(
            ImageType::sniff(b"GIF89a\x2c\x01\xfa\x00"),
            Some(ImageType::Gif)
        );
        assert_eq!(ImageType::sniff(b"hello, I am text\n"), None);
        assert_eq!(ImageType::sniff(b"<svg xmlns="), None);
    }

    #[test]
    fn reads_width_and_height_of_each_type() {
        assert_eq!(
            ImageType::Png.dimensions(&png(300, 250)),
            Some(Size { w: 300, h: 250 })
        );
        assert_eq!(
            ImageType::Gif.dimensions(b"GIF89a\xd8\x02\x5a\x00"),
            Some(Size { w: 728, h: 90 })
        );
        // SOI, an APP0 segment of 16 bytes, then SOF0 (8-bit, 250 high, 300 wide).
        let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10];
        jpeg.extend([0; 14]);
        jpeg.extend([0xFF, 0xC0, 0x00, 0x11, 0x08, 0x00, 0xFA, 0x01, 0x2C, 0x03]);
        assert_eq!(
            ImageType::Jpeg.dimensions(&jpeg),
            Some(Size { w: 300, h: 250 })
        );
        // VP8X: canvas width and height minus one, 24 bits each.
        let mut webp = b"RIFF\0\0\0\0WEBPVP8X\x0a\0\0\0\0\0\0\0".to_vec();
        webp.extend([0x2B, 0x01, 0x00, 0xF9, 0x00, 0x00]);
        assert_eq!(
            ImageType::Webp.dimensions(&webp),
            Some(Size { w: 300, h: 250 })
        );
        assert_eq!(ImageType::Png.dimensions(b"\x89PNG\r\n\x1a\n"), None);
    }

    #[test]
    fn an_image_fits_its_size_or_a_multiple_of_it() {
        let slot = Size { w: 300, h: 250 };
        assert!(fits(slot, slot));
        assert!(fits(Size { w: 600, h: 500 }, slot));
        assert!(!fits(Size { w: 600, h: 250 }, slot));
        assert!(!fits(Size { w: 728, h: 90 }, slot));
    }
}
