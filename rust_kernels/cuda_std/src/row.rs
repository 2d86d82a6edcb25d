//! Streaming through a row of elements in 16-byte packs (`ld.global.v4`/`st.global.v4`), with scalar elements
//! before the first 16-byte boundary and after the last whole pack: any length, any element-aligned start.
//! Thread `thread` of `threads` takes packs `thread`, `thread + threads`, ... (coalesced), and the scalar elements
//! likewise; the closures receive each element's index in the row and its value in the accumulation type.
//! [`grid_stride`] is the plain element loop over a whole launch.

use crate::float::Float;
use crate::mem::{DevicePtr, StoreAcc};
use crate::pack::Lanes;

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
        for l in 0..lanes {
            f(split.head + p * lanes + l, pack.lane(l).to_acc());
        }
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
        for l in 0..lanes {
            let i = split.head + p * lanes + l;
            pack.set_lane(
                l,
                D::from_acc(f(i, pack.lane(l).to_acc(), others.map(|o| o.lane(l).to_acc()))),
            );
        }
        unsafe { to.store(p, pack) };
        p += threads;
    }
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
