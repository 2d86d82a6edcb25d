use core::arch::asm;
use core::arch::nvptx;

macro_rules! special_registers {
    ($($name:ident => $intrinsic:ident),* $(,)?) => {$(
        #[inline(always)]
        pub fn $name() -> u32 {
            unsafe { nvptx::$intrinsic() as u32 }
        }
    )*};
}

special_registers! {
    thread_idx_x => _thread_idx_x, thread_idx_y => _thread_idx_y, thread_idx_z => _thread_idx_z,
    block_idx_x => _block_idx_x, block_idx_y => _block_idx_y, block_idx_z => _block_idx_z,
    block_dim_x => _block_dim_x, block_dim_y => _block_dim_y, block_dim_z => _block_dim_z,
    grid_dim_x => _grid_dim_x, grid_dim_y => _grid_dim_y, grid_dim_z => _grid_dim_z,
}

#[inline(always)]
pub fn sync_threads() {
    unsafe { nvptx::_syncthreads() }
}

#[inline(always)]
pub fn sync_threads_count(pred: u32) -> u32 {
    let count: u32;
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.u32 p, {pred}, 0; bar.red.popc.u32 {count}, 0, p; }}",
            pred = in(reg32) pred, count = out(reg32) count,
        )
    };
    count
}

#[inline(always)]
pub fn sync_threads_and(pred: u32) -> u32 {
    let all: u32;
    unsafe {
        asm!(
            "{{ .reg .pred p, q; setp.ne.u32 p, {pred}, 0; bar.red.and.pred q, 0, p; selp.u32 {all}, 1, 0, q; }}",
            pred = in(reg32) pred, all = out(reg32) all,
        )
    };
    all
}

#[inline(always)]
pub fn sync_threads_or(pred: u32) -> u32 {
    let any: u32;
    unsafe {
        asm!(
            "{{ .reg .pred p, q; setp.ne.u32 p, {pred}, 0; bar.red.or.pred q, 0, p; selp.u32 {any}, 1, 0, q; }}",
            pred = in(reg32) pred, any = out(reg32) any,
        )
    };
    any
}
