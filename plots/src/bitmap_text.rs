//! Text in bitmap charts, with each glyph where its metrics put it.
//!
//! plotters 0.3.7 rasterises text with ab_glyph, but it draws each glyph's pixels from the pen
//! position without the glyph's left side bearing (`style/font/ab_glyph.rs`, `draw`), so letters
//! with different bearings look unevenly spaced ("tim e" for "time"). [`GlyphBackend`] wraps a
//! bitmap backend and draws text in the embedded font itself: it keeps plotters' layout box,
//! anchoring, rotation, baseline, kerning and colour blending, and places each glyph at its pen
//! position plus its bearing (with the pen kept in fractional pixels). Everything else, and
//! text in any other font, goes to the wrapped backend unchanged. SVG output needs none of this:
//! it writes `<text>` elements.

use std::sync::OnceLock;

use ab_glyph::{Font, FontRef, ScaleFont, point};
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
};

/// The family our text uses, which the embedded font is registered as (see `lib.rs`).
const FAMILY: &str = "sans-serif";

/// The embedded font, parsed once; `None` if it cannot be parsed (then plotters draws text).
fn embedded_font() -> Option<&'static FontRef<'static>> {
    static FONT: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    FONT.get_or_init(|| FontRef::try_from_slice(crate::FONT_BYTES).ok())
        .as_ref()
}

/// One pixel of laid-out text: its position relative to the text's origin (before anchoring
/// and rotation) and how much of it the glyph covers, from 0 to 1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Coverage {
    pub x: i32,
    pub y: i32,
    pub coverage: f32,
}

/// Lays out `text` at `size` pixels as plotters means to: the pen advances by each glyph's
/// advance plus the kerning with the glyph before, and the baseline sits `size / 2` below the
/// origin. Each glyph is rasterised at its exact pen position (fractional pixels included), so
/// its left side bearing, which plotters leaves out, is kept; and every glyph shares that one
/// baseline (plotters rounds each glyph's top toward zero, which drops glyphs taller than
/// `size / 2` a pixel below short ones, so a decimal point floats above the digits).
pub(crate) fn lay_out(font: &FontRef<'_>, size: f64, text: &str) -> Vec<Coverage> {
    let scaled = font.as_scaled(size as f32);
    let mut pixels = Vec::new();
    let baseline_y = (size as f32) / 2.0;
    let mut pen_x = 0f32;
    let mut previous = None;
    for character in text.chars() {
        let id = scaled.glyph_id(character);
        if let Some(previous) = previous {
            pen_x += scaled.kern(previous, id);
        }
        previous = Some(id);
        let mut glyph = scaled.scaled_glyph(character);
        glyph.position = point(pen_x, baseline_y);
        if let Some(outline) = font.outline_glyph(glyph) {
            let bounds = outline.px_bounds();
            let (left, top) = (bounds.min.x as i32, bounds.min.y as i32);
            outline.draw(|x, y, coverage| {
                pixels.push(Coverage {
                    x: left + x as i32,
                    y: top + y as i32,
                    coverage,
                });
            });
        }
        pen_x += scaled.h_advance(id);
    }
    pixels
}

/// A bitmap backend whose text in the embedded font is drawn by [`lay_out`].
pub(crate) struct GlyphBackend<B> {
    inner: B,
}

impl<B> GlyphBackend<B> {
    pub fn new(inner: B) -> Self {
        GlyphBackend { inner }
    }
}

impl<B: DrawingBackend> DrawingBackend for GlyphBackend<B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vertices: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.fill_polygon(vertices, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        (width, height): (u32, u32),
        source: &[u8],
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.blit_bitmap(pos, (width, height), source)
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
        self.inner.estimate_text_size(text, style)
    }

    /// plotters' own `draw_text` (plotters-backend 0.3.7), with the glyphs from [`lay_out`]:
    /// the same layout box and anchor, the same rotation, the same clipping and blending.
    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        let font = match embedded_font() {
            Some(font) if style.family().as_str() == FAMILY => font,
            _ => return self.inner.draw_text(text, style, pos),
        };
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let ((min_x, min_y), (max_x, max_y)) = style
            .layout_box(text)
            .map_err(|error| DrawingErrorKind::FontError(Box::new(error)))?;
        let (width, height) = (max_x - min_x, max_y - min_y);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -width,
            HPos::Center => -width / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -height / 2,
            VPos::Bottom => -height,
        };
        let transform = style.transform();
        let (size_x, size_y) = self.get_size();
        for pixel in lay_out(font, style.size(), text) {
            let (x, y) = transform.transform(pixel.x + dx - min_x, pixel.y + dy - min_y);
            let (x, y) = (pos.0 + x, pos.1 + y);
            if x >= 0 && x < size_x as i32 && y >= 0 && y < size_y as i32 {
                let blended = BackendColor {
                    alpha: color.alpha * f64::from(pixel.coverage),
                    rgb: color.rgb,
                };
                self.inner.draw_pixel((x, y), blended)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use plotters::prelude::*;
    use plotters::style::FontTransform;
    use plotters::style::text_anchor::{HPos, Pos, VPos};

    use super::*;

    /// Where the text starts: its left end, or for rotated text its bottom end.
    const ORIGIN: (i32, i32) = (20, 20);

    /// Each glyph's first inked pixel along the text, from ab_glyph's advance layout (advance,
    /// kerning and left side bearing), independently of [`lay_out`].
    fn expected_starts(text: &str, size: f64) -> Vec<i32> {
        let font = embedded_font().expect("the embedded font parses");
        let scaled = font.as_scaled(size as f32);
        let mut starts = Vec::new();
        let mut pen_x = 0f32;
        let mut previous = None;
        for character in text.chars() {
            let id = scaled.glyph_id(character);
            if let Some(previous) = previous {
                pen_x += scaled.kern(previous, id);
            }
            previous = Some(id);
            starts.push((pen_x + scaled.h_side_bearing(id)).floor() as i32);
            pen_x += scaled.h_advance(id);
        }
        starts
    }

    /// `text` drawn through [`GlyphBackend`] in black on white, anchored at its top left (before
    /// the rotation) at [`ORIGIN`], rotated text upwards from the bottom.
    struct Drawn {
        rotated: bool,
        width: u32,
        height: u32,
        rgb: Vec<u8>,
    }

    impl Drawn {
        fn new(text: &str, size: f64, transform: FontTransform) -> Drawn {
            assert!(crate::embedded_font_registered());
            let rotated = matches!(transform, FontTransform::Rotate270);
            let (width, height) = if rotated { (120, 500) } else { (500, 120) };
            let mut rgb = vec![0u8; (width * height * 3) as usize];
            let origin = if rotated {
                (ORIGIN.0, height as i32 - ORIGIN.1)
            } else {
                ORIGIN
            };
            {
                let backend = BitMapBackend::with_buffer(&mut rgb, (width, height));
                let area = GlyphBackend::new(backend).into_drawing_area();
                area.fill(&WHITE).unwrap();
                let style = (FAMILY, size)
                    .into_font()
                    .transform(transform)
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Left, VPos::Top));
                area.draw_text(text, &style, origin).unwrap();
                area.present().unwrap();
            }
            Drawn {
                rotated,
                width,
                height,
                rgb,
            }
        }

        /// The darkest channel at `along` the text (from [`ORIGIN`]) and `across` it (from the
        /// top, or for rotated text from the left), 255 for white.
        fn ink(&self, along: u32, across: u32) -> u8 {
            let (x, y) = if self.rotated {
                (across, self.height - 1 - along)
            } else {
                (along, across)
            };
            let at = ((y * self.width + x) * 3) as usize;
            self.rgb[at..at + 3].iter().copied().min().unwrap_or(255)
        }

        /// The runs of inked positions along the text, as ranges from [`ORIGIN`]: one per glyph
        /// when no two glyphs touch.
        fn runs(&self) -> Vec<std::ops::Range<i32>> {
            let (length, across) = if self.rotated {
                (self.height, self.width)
            } else {
                (self.width, self.height)
            };
            let origin = if self.rotated { ORIGIN.1 } else { ORIGIN.0 };
            let mut runs: Vec<std::ops::Range<i32>> = Vec::new();
            let mut in_glyph = false;
            for along in 0..length {
                let inked = (0..across).any(|other| self.ink(along, other) < 255);
                let at = along as i32 - origin;
                match (inked, in_glyph) {
                    (true, false) => runs.push(at..at + 1),
                    (true, true) => runs.last_mut().expect("a run is open").end = at + 1,
                    _ => {}
                }
                in_glyph = inked;
            }
            runs
        }
    }

    /// `text` must be glyphs that do not touch at `size`, so each is one run.
    fn check(text: &str, size: f64, transform: FontTransform) {
        let expected = expected_starts(text, size);
        let runs = Drawn::new(text, size, transform).runs();
        let drawn: Vec<i32> = runs.iter().map(|run| run.start).collect();
        assert_eq!(drawn.len(), expected.len(), "{text:?}: one run per glyph");
        for ((character, at), want) in text.chars().zip(&drawn).zip(&expected) {
            assert!(
                (at - want).abs() <= 1,
                "{text:?}: {character:?} starts {at} px along the text, its metrics say {want}; \
                 all drawn {drawn:?}, expected {expected:?}",
            );
        }
    }

    /// plotters 0.3.7 drew every glyph at its pen position without its left side bearing:
    /// "time" came out as "tim e" ('i' and 'm' 5 px early at 60 px, 'e' 3 px).
    #[test]
    fn glyphs_start_where_their_advance_and_bearing_put_them() {
        check("time", 60.0, FontTransform::None);
        check("timeout", 60.0, FontTransform::None);
        check("time", 60.0, FontTransform::Rotate270);
        check("timeout", 60.0, FontTransform::Rotate270);
        check("time", 17.0, FontTransform::None);
    }

    /// plotters 0.3.7 rounded each glyph's top toward zero, which put glyphs taller than half
    /// the size a pixel lower than short ones: the point of "1.2" floated above the digits.
    /// All three glyphs end flat on the baseline, so their last solid rows must agree.
    #[test]
    fn glyphs_share_one_baseline() {
        let drawn = Drawn::new("1.2", 25.0, FontTransform::None);
        let runs = drawn.runs();
        assert_eq!(runs.len(), 3, "one run per glyph");
        let last_solid_rows: Vec<u32> = runs
            .iter()
            .map(|run| {
                (0..drawn.height)
                    .filter(|&row| {
                        run.clone()
                            .any(|at| drawn.ink((at + ORIGIN.0) as u32, row) < 64)
                    })
                    .max()
                    .expect("a visible glyph")
            })
            .collect();
        assert!(
            last_solid_rows.iter().all(|&row| row == last_solid_rows[0]),
            "the last solid row of '1', '.', '2': {last_solid_rows:?}",
        );
    }
}
