//! Streaming through a row of elements in 16-byte packs (`ld.global.v4`/`st.global.v4`), with scalar elements
//! before the first 16-byte boundary and after the last whole pack: any length, any element-aligned start.
//! Thread `thread` of `threads` takes packs `thread`, `thread + threads`, ... (coalesced), and the scalar elements
//! likewise; the closures receive each element's index in the row and its value in the accumulation type.
//! [`Tile`] and [`PackedTile`] hold a row in registers across the CTA, for kernels that reduce a row and then write
//! from it (a norm, a softmax): one read instead of two. [`grid_stride`] is the plain element loop over a whole launch.

use crate::float::{Accum, Float};
use crate::mem::{DevicePtr, StoreAcc};
use crate::pack::{store_whole, unroll, Lanes};

/// How a row splits: `head` scalar elements up to the first 16-byte boundary, `packs` whole packs, then the tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    pub head: usize,
    pub packs: usize,
    pub len: usize,
}

impl Split {
    /// The split of `len` elements starting at `ptr` (all scalar when `ptr` is not aligned to its element).
    #[inline(always)]
    pub fn of<D: Float>(ptr: *const D, len: usize) -> Self {
        let size = core::mem::size_of::<D>();
        let lanes = <D::Pack as Lanes>::LANES;
        let misalign = ptr as usize % 16;
        if !misalign.is_multiple_of(size) {
            return Self {
                head: len,
                packs: 0,
                len,
            };
        }
        let head = (((16 - misalign) % 16) / size).min(len);
        Self {
            head,
            packs: (len - head) / lanes,
            len,
        }
    }

    /// Where the scalar tail starts.
    #[inline(always)]
    pub fn tail(&self, lanes: usize) -> usize {
        self.head + self.packs * lanes
    }
}

/// Calls `f(i, row[i])` for this thread's elements of the row.
///
/// # Safety
/// `row` must point to `len` readable elements.
#[inline(always)]
pub unsafe fn for_each<D: Float>(
    row: *mut D,
    len: usize,
    thread: usize,
    threads: usize,
    mut f: impl FnMut(usize, D::Acc),
) {
    let lanes = <D::Pack as Lanes>::LANES;
    let split = Split::of(row, len);
    scalars(split, lanes, thread, threads, |i| f(i, unsafe { row.load(i) }.to_acc()));
    let packs = unsafe { row.add(split.head) }.cast::<D::Pack>();
    let mut p = thread;
    while p < split.packs {
        let pack = unsafe { packs.load(p) };
        unroll(lanes, |l| f(split.head + p * lanes + l, D::lane_acc(&pack, l)));
        p += threads;
    }
}

/// `dst[i] = f(i, src[i])` for this thread's elements; `dst` may be `src`. Vectorised when both rows have the same
/// offset from a 16-byte boundary, element by element otherwise.
///
/// # Safety
/// `src` must point to `len` readable elements, `dst` to `len` writable ones.
#[inline(always)]
pub unsafe fn map<D: Float>(
    src: *mut D,
    dst: *mut D,
    len: usize,
    thread: usize,
    threads: usize,
    mut f: impl FnMut(usize, D::Acc) -> D::Acc,
) {
    unsafe { map_with(src, [], dst, len, thread, threads, |i, v, []| f(i, v)) }
}

/// `dst[i] = f(i, src[i], [aux[0][i], ...])` for this thread's elements: rows read alongside (a weight, a bias).
/// Vectorised when every row has the same offset from a 16-byte boundary as `src`, element by element otherwise.
///
/// # Safety
/// `src` and each `aux` must point to `len` readable elements, `dst` to `len` writable ones.
#[inline(always)]
pub unsafe fn map_with<D: Float, const K: usize>(
    src: *mut D,
    aux: [*mut D; K],
    dst: *mut D,
    len: usize,
    thread: usize,
    threads: usize,
    mut f: impl FnMut(usize, D::Acc, [D::Acc; K]) -> D::Acc,
) {
    let lanes = <D::Pack as Lanes>::LANES;
    let mut split = Split::of(src, len);
    let same_phase = |p: *mut D| (src as usize).wrapping_sub(p as usize).is_multiple_of(16);
    if !same_phase(dst) || !aux.iter().all(|&a| same_phase(a)) {
        split = Split {
            head: len,
            packs: 0,
            len,
        };
    }
    scalars(split, lanes, thread, threads, |i| unsafe {
        dst.store_acc(i, f(i, src.load(i).to_acc(), aux.map(|a| a.load(i).to_acc())));
    });
    let packs = |p: *mut D| unsafe { p.add(split.head) }.cast::<D::Pack>();
    let (from, to, with) = (packs(src), packs(dst), aux.map(packs));
    let mut p = thread;
    while p < split.packs {
        let mut pack = unsafe { from.load(p) };
        let others = with.map(|a| unsafe { a.load(p) });
        unroll(lanes, |l| {
            let i = split.head + p * lanes + l;
            let value = f(i, D::lane_acc(&pack, l), others.map(|o| D::lane_acc(&o, l)));
            pack.set_lane(l, D::from_acc(value));
        });
        unsafe { to.store(p, pack) };
        p += threads;
    }
}

/// A row held in registers by the threads of a CTA: thread `thread` of `threads` holds packs `thread`,
/// `thread + threads`, ... (`E` elements, `E / LANES` packs), and at most one scalar element on each side of the
/// packs. One read of the row serves a reduction and the write after it, each element's value computed once
/// ([`Tile::update`]) and kept in the accumulation type.
///
/// [`Tile::load`] returns `None` when the row does not fit: more than `E / LANES` packs per thread, or more scalar
/// elements on a side than threads (a row whose start is not aligned to its element is all scalars). The kernel
/// then streams the row with [`for_each`] and [`map_with`].
pub type Tile<D, const E: usize> = Held<D, Values<D, E>>;

/// A row held as [`Tile`] holds it, but as `P` 16-byte packs of storage per thread (`P * LANES` elements), each
/// element widened where it is read: half the registers of a [`Tile`] for bf16 and f16 (more CTAs an SM), the same
/// for f32 and f64. For kernels that read the row's values as loaded (a norm); one that replaces them first (a
/// softmax's exponentials) keeps them in a [`Tile`].
pub type PackedTile<D, const P: usize> = Held<D, Packs<D, P>>;

/// How a [`Held`] row keeps its packed elements.
pub trait Hold<D: Float>: Copy {
    /// Packs per thread.
    const PACKS: usize;
    fn empty() -> Self;
    /// Keeps pack `k` as loaded.
    fn put(&mut self, k: usize, pack: &D::Pack);
    /// Lane `l` of pack `k`, in the accumulation type.
    fn get(&self, k: usize, l: usize) -> D::Acc;
}

/// A [`Tile`]'s elements: in the accumulation type.
#[derive(Clone, Copy)]
pub struct Values<D: Float, const E: usize>([D::Acc; E]);

/// A [`PackedTile`]'s elements: 16-byte packs of storage.
#[derive(Clone, Copy)]
pub struct Packs<D: Float, const P: usize>([D::Pack; P]);

impl<D: Float, const E: usize> Hold<D> for Values<D, E> {
    /// `E` must be a positive multiple of the lanes of a pack and at most `UNROLL_MAX`.
    const PACKS: usize = {
        let lanes = <D::Pack as Lanes>::LANES;
        assert!(E > 0 && E.is_multiple_of(lanes) && E <= crate::pack::UNROLL_MAX);
        E / lanes
    };

    #[inline(always)]
    fn empty() -> Self {
        Self([D::Acc::ZERO; E])
    }

    #[inline(always)]
    fn put(&mut self, k: usize, pack: &D::Pack) {
        unroll(<D::Pack as Lanes>::LANES, |l| {
            self.0[k * <D::Pack as Lanes>::LANES + l] = D::lane_acc(pack, l)
        });
    }

    #[inline(always)]
    fn get(&self, k: usize, l: usize) -> D::Acc {
        self.0[k * <D::Pack as Lanes>::LANES + l]
    }
}

impl<D: Float, const E: usize> Values<D, E> {
    /// Replaces lane `l` of pack `k` ([`Tile::update`]).
    #[inline(always)]
    fn set(&mut self, k: usize, l: usize, value: D::Acc) {
        self.0[k * <D::Pack as Lanes>::LANES + l] = value;
    }
}

impl<D: Float, const P: usize> Hold<D> for Packs<D, P> {
    /// `P` must be positive and at most `UNROLL_MAX`.
    const PACKS: usize = {
        assert!(P > 0 && P <= crate::pack::UNROLL_MAX);
        P
    };

    #[inline(always)]
    fn empty() -> Self {
        Self([D::Pack::splat(D::from_acc(D::Acc::ZERO)); P])
    }

    #[inline(always)]
    fn put(&mut self, k: usize, pack: &D::Pack) {
        self.0[k] = *pack;
    }

    #[inline(always)]
    fn get(&self, k: usize, l: usize) -> D::Acc {
        D::lane_acc(&self.0[k], l)
    }
}

/// A row held in registers across a CTA, its packed elements kept as `H` keeps them: [`Tile`] and [`PackedTile`].
pub struct Held<D: Float, H: Hold<D>> {
    packed: H,
    head: D::Acc,
    tail: D::Acc,
    split: Split,
    phase: usize,
    thread: usize,
    threads: usize,
}

impl<D: Float, H: Hold<D>> Held<D, H> {
    const LANES: usize = <D::Pack as Lanes>::LANES;

    /// This thread's part of the `len` elements at `row`, or `None` when the row does not fit.
    ///
    /// # Safety
    /// `row` must point to `len` readable elements.
    #[inline(always)]
    pub unsafe fn load(row: *mut D, len: usize, thread: usize, threads: usize) -> Option<Self> {
        let split = Split::of(row, len);
        let tail_len = len - split.tail(Self::LANES);
        if split.packs > H::PACKS * threads || split.head > threads || tail_len > threads {
            return None;
        }
        let zero = D::Acc::ZERO;
        let mut tile = Self {
            packed: H::empty(),
            head: zero,
            tail: zero,
            split,
            phase: row as usize % 16,
            thread,
            threads,
        };
        if thread < split.head {
            tile.head = unsafe { row.load(thread) }.to_acc();
        }
        if thread < tail_len {
            tile.tail = unsafe { row.load(split.tail(Self::LANES) + thread) }.to_acc();
        }
        let packs = unsafe { row.add(split.head) }.cast::<D::Pack>();
        let packed = &mut tile.packed;
        unroll(H::PACKS, |k| {
            let p = thread + k * threads;
            if p < split.packs {
                packed.put(k, &unsafe { packs.load(p) });
            }
        });
        Some(tile)
    }

    /// Folds `f(acc, i, value)` over this thread's elements (a partial sum, maximum or Welford state, to be merged
    /// across the CTA by `reduce`).
    #[inline(always)]
    pub fn fold<A: Copy>(&self, init: A, mut f: impl FnMut(A, usize, D::Acc) -> A) -> A {
        let mut acc = init;
        Self::slots(self.split, self.thread, self.threads, |i, slot| {
            acc = f(acc, i, self.get(slot))
        });
        acc
    }

    /// `dst[i] = f(i, value, [aux[0][i], ...])` for this thread's elements: rows read alongside (a weight, a bias).
    /// In 16-byte packs when `dst` and every `aux` have the row's offset from a 16-byte boundary, element by element
    /// otherwise. `dst` may be the row the tile was loaded from.
    ///
    /// # Safety
    /// Each `aux` must point to the row's length of readable elements, `dst` to as many writable ones.
    #[inline(always)]
    pub unsafe fn store<const K: usize>(
        &self,
        aux: [*mut D; K],
        dst: *mut D,
        mut f: impl FnMut(usize, D::Acc, [D::Acc; K]) -> D::Acc,
    ) {
        let split = self.split;
        let along = |i: usize| aux.map(|a| unsafe { a.load(i) }.to_acc());
        let same_phase = |p: *mut D| p as usize % 16 == self.phase;
        if !same_phase(dst) || !aux.iter().all(|&a| same_phase(a)) {
            Self::slots(split, self.thread, self.threads, |i, slot| unsafe {
                dst.store_acc(i, f(i, self.get(slot), along(i)))
            });
            return;
        }
        if self.thread < split.head {
            unsafe { dst.store_acc(self.thread, f(self.thread, self.head, along(self.thread))) };
        }
        let t = split.tail(Self::LANES) + self.thread;
        if t < split.len {
            unsafe { dst.store_acc(t, f(t, self.tail, along(t))) };
        }
        let packs = |p: *mut D| unsafe { p.add(split.head) }.cast::<D::Pack>();
        unroll(H::PACKS, |k| {
            let p = self.thread + k * self.threads;
            if p >= split.packs {
                return;
            }
            let base = split.head + p * Self::LANES;
            let others = aux.map(|a| unsafe { packs(a).load(p) });
            let mut out = D::Pack::splat(D::from_acc(D::Acc::ZERO));
            unroll(Self::LANES, |l| {
                let value = f(base + l, self.packed.get(k, l), others.map(|o| D::lane_acc(&o, l)));
                out.set_lane(l, D::from_acc(value));
            });
            unsafe { store_whole(packs(dst), p, out) };
        });
    }

    #[inline(always)]
    fn get(&self, slot: Slot) -> D::Acc {
        match slot {
            Slot::Head => self.head,
            Slot::Tail => self.tail,
            Slot::Packed(k, l) => self.packed.get(k, l),
        }
    }

    /// Calls `f(i, slot)` for each element thread `thread` of `threads` holds of a `split` row. (The lanes are
    /// named as the constant `Self::LANES` inside each closure: a count captured from outside is not a constant
    /// there, and `unroll` over it is not unrolled.)
    #[inline(always)]
    fn slots(split: Split, thread: usize, threads: usize, mut f: impl FnMut(usize, Slot)) {
        if thread < split.head {
            f(thread, Slot::Head);
        }
        if split.tail(Self::LANES) + thread < split.len {
            f(split.tail(Self::LANES) + thread, Slot::Tail);
        }
        unroll(H::PACKS, |k| {
            let p = thread + k * threads;
            if p < split.packs {
                unroll(Self::LANES, |l| f(split.head + p * Self::LANES + l, Slot::Packed(k, l)));
            }
        });
    }
}

impl<D: Float, const E: usize> Tile<D, E> {
    /// Replaces each of this thread's elements by `f(i, value)` (its exponential, say), in the accumulation type.
    #[inline(always)]
    pub fn update(&mut self, mut f: impl FnMut(usize, D::Acc) -> D::Acc) {
        Self::slots(self.split, self.thread, self.threads, |i, slot| {
            let value = f(i, self.get(slot));
            match slot {
                Slot::Head => self.head = value,
                Slot::Tail => self.tail = value,
                Slot::Packed(k, l) => self.packed.set(k, l, value),
            }
        });
    }
}

/// Where a tile keeps an element: the scalar before the packs, the one after them, or lane `l` of pack `k`.
#[derive(Clone, Copy)]
enum Slot {
    Head,
    Tail,
    Packed(usize, usize),
}

/// This thread's head and tail elements of a split row.
#[inline(always)]
fn scalars(split: Split, lanes: usize, thread: usize, threads: usize, mut f: impl FnMut(usize)) {
    let mut i = thread;
    while i < split.head {
        f(i);
        i += threads;
    }
    let mut i = split.tail(lanes) + thread;
    while i < split.len {
        f(i);
        i += threads;
    }
}

/// The element indices of this thread in a grid-stride loop over `n` elements: `index_1d()`, then steps of the
/// launch's thread count.
#[inline(always)]
pub fn grid_stride(n: usize) -> impl Iterator<Item = usize> {
    let start = crate::thread::index_1d() as usize;
    let step = (crate::thread::grid_dim_x() * crate::thread::block_dim_x()) as usize;
    (start..n).step_by(step.max(1))
}
