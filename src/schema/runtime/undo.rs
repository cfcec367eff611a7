//! The recogniser's undo log: every mutation of the state goes through these helpers, which
//! log what they overwrite, and each pushed byte starts with a mark, so `pop_bytes` restores
//! exactly the previous state whatever the nesting depth. Frames that close move their arena
//! tails to graveyards ([`Graves`]), so undo never allocates.

use super::*;

/// One logged change.
#[derive(Clone, Copy, Debug)]
pub(super) enum Undo {
    /// Where a pushed byte's changes start.
    Mark,
    Frame(u32, Frame),
    Alt(u32, Alt),
    Bit(u32, u64),
    /// The arenas' lengths before something was appended.
    Len {
        frames: u32,
        alts: u32,
        buf: u32,
        bits: u32,
        xk: u32,
        xtext: u32,
        raw: u32,
    },
    /// A frame closed: how much of each arena went to the graveyard.
    Restore {
        alts: u32,
        buf: u32,
        bits: u32,
        xk: u32,
        xtext: u32,
        raw: u32,
    },
}

/// The arena tails of closed frames, kept for undo.
#[derive(Default)]
pub(super) struct Graves {
    frames: Vec<Frame>,
    alts: Vec<Alt>,
    buf: Vec<u8>,
    bits: Vec<u64>,
    xk: Vec<XKey>,
    xtext: Vec<u8>,
    raw: Vec<u8>,
}

impl<'a> Rt<'a> {
    pub(super) fn lens(&self) -> Undo {
        Undo::Len {
            frames: self.st.frames.len() as u32,
            alts: self.st.alts.len() as u32,
            buf: self.st.buf.len() as u32,
            bits: self.st.bits.len() as u32,
            xk: self.st.xk.len() as u32,
            xtext: self.st.xtext.len() as u32,
            raw: self.st.raw.len() as u32,
        }
    }

    pub(super) fn set_frame(&mut self, i: usize, f: Frame) {
        self.log.push(Undo::Frame(i as u32, self.st.frames[i]));
        self.st.frames[i] = f;
    }

    pub(super) fn set_alt(&mut self, i: usize, a: Alt) {
        self.log.push(Undo::Alt(i as u32, self.st.alts[i]));
        self.st.alts[i] = a;
    }

    pub(super) fn kill(&mut self, i: usize) {
        let mut a = self.st.alts[i];
        a.alive = false;
        self.set_alt(i, a);
    }

    pub(super) fn set_bit(&mut self, w: usize, v: u64) {
        self.log.push(Undo::Bit(w as u32, self.st.bits[w]));
        self.st.bits[w] = v;
    }

    /// Log current lengths (before appending anything this step).
    pub(super) fn note_lens(&mut self) {
        let l = self.lens();
        self.log.push(l);
    }

    /// Remove the top frame and its arena tails (to the graveyards).
    pub(super) fn pop_frame(&mut self) {
        let f = self.st.frames.pop().expect("frame");
        self.graves.frames.push(f);
        let na = self.st.alts.len() - f.alts as usize;
        self.graves.alts.extend(self.st.alts.drain(f.alts as usize..));
        let nb = self.st.buf.len() - f.buf as usize;
        self.graves.buf.extend(self.st.buf.drain(f.buf as usize..));
        let nw = self.st.bits.len() - f.bits as usize;
        self.graves.bits.extend(self.st.bits.drain(f.bits as usize..));
        let nx = self.st.xk.len() - f.xk as usize;
        self.graves.xk.extend(self.st.xk.drain(f.xk as usize..));
        let nt = self.st.xtext.len() - f.xtext as usize;
        self.graves.xtext.extend(self.st.xtext.drain(f.xtext as usize..));
        // Only the outermost `uniqueItems` array owns raw text (`NONE` elsewhere).
        let nr = if f.raw == NONE { 0 } else { self.st.raw.len() - f.raw as usize };
        if f.raw != NONE {
            self.graves.raw.extend(self.st.raw.drain(f.raw as usize..));
        }
        self.log.push(Undo::Restore {
            alts: na as u32,
            buf: nb as u32,
            bits: nw as u32,
            xk: nx as u32,
            xtext: nt as u32,
            raw: nr as u32,
        });
    }

    pub(super) fn undo_one(&mut self) -> bool {
        let u = self.log.pop().expect("undo log");
        match u {
            Undo::Mark => return true,
            Undo::Frame(i, f) => self.st.frames[i as usize] = f,
            Undo::Alt(i, a) => self.st.alts[i as usize] = a,
            Undo::Bit(i, w) => self.st.bits[i as usize] = w,
            Undo::Len { frames, alts, buf, bits, xk, xtext, raw } => {
                self.st.raw.truncate(raw as usize);
                self.st.frames.truncate(frames as usize);
                self.st.alts.truncate(alts as usize);
                self.st.buf.truncate(buf as usize);
                self.st.bits.truncate(bits as usize);
                self.st.xk.truncate(xk as usize);
                self.st.xtext.truncate(xtext as usize);
            }
            Undo::Restore { alts, buf, bits, xk, xtext, raw } => {
                fn back<T>(dst: &mut Vec<T>, src: &mut Vec<T>, n: u32) {
                    let at = src.len() - n as usize;
                    dst.extend(src.drain(at..));
                }
                back(&mut self.st.alts, &mut self.graves.alts, alts);
                back(&mut self.st.buf, &mut self.graves.buf, buf);
                back(&mut self.st.bits, &mut self.graves.bits, bits);
                back(&mut self.st.xk, &mut self.graves.xk, xk);
                back(&mut self.st.xtext, &mut self.graves.xtext, xtext);
                back(&mut self.st.raw, &mut self.graves.raw, raw);
                let f = self.graves.frames.pop().expect("grave frame");
                self.st.frames.push(f);
            }
        }
        false
    }

    pub(super) fn undo_byte(&mut self) {
        while !self.undo_one() {}
    }
}
