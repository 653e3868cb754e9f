//! The process's allocator: mimalloc, asked for plain blocks whenever plain blocks are aligned
//! enough.
//!
//! The binary (`src/bin/sqlgrade/main.rs`) and the benchmarks register [`Allocator`] as the
//! global allocator. It is mimalloc (scoring workers allocate rows that the sink's task frees;
//! glibc's arenas spent a quarter of the daemon's CPU in malloc/free) with one difference from
//! the `mimalloc` crate's `MiMalloc`, which passes every request to `mi_malloc_aligned`: a
//! request whose alignment a plain block already has goes to `mi_malloc`, the rule Rust's own
//! `System` allocator follows for `malloc`.
//!
//! Why it matters: in mimalloc 3, `mi_malloc_aligned` takes its fast path only while the size
//! class's page has a free block at hand; otherwise a size whose block size is not a power of
//! two (24, 40, 48 … bytes — most of a parse tree's nodes and strings) is over-allocated by
//! `alignment - 1` bytes in the next size class, and that class's page, not its own, is
//! refilled. It was ~50 instructions per allocation and 8 % of a line-rate event's
//! instructions (`CHANGELOG.md`, "Plain blocks from the allocator").
//!
//! The rule: mimalloc rounds every block of 16 bytes or more to a multiple of 16 and starts
//! each page's blocks 16-aligned (`MI_MAX_ALIGN_SIZE`, and the assertion in `alloc.c`'s
//! `_mi_page_malloc_zero`), and smaller blocks are word-aligned. So a request with
//! `align <= 16` and `align <= size` is satisfied by any block that holds `size` bytes.
//! Larger alignments take mimalloc's aligned path as before. `dealloc` is `mi_free` for both
//! (mimalloc finds a block's page from its address either way).

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// The largest alignment every mimalloc block of at least that size has (`MI_MAX_ALIGN_SIZE`).
const PLAIN_BLOCK_ALIGN: usize = 16;

/// mimalloc as the global allocator; see the module documentation.
#[derive(Debug, Default, Clone, Copy)]
pub struct Allocator;

/// Whether a plain mimalloc block of `size` bytes is aligned enough for `align`.
#[inline]
fn plain_block_fits(size: usize, align: usize) -> bool {
    align <= PLAIN_BLOCK_ALIGN && align <= size
}

// SAFETY: every method hands the request to mimalloc, which returns null on failure, blocks of
// at least the requested size, and (by the rule in the module documentation) the requested
// alignment; every pointer given back came from mimalloc, so `mi_free`/`mi_realloc*` accept it.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: plain FFI calls; mimalloc accepts any size and a power-of-two alignment,
        // which `Layout` guarantees.
        unsafe {
            if plain_block_fits(layout.size(), layout.align()) {
                mi::mi_malloc(layout.size()).cast()
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe {
            if plain_block_fits(layout.size(), layout.align()) {
                mi::mi_zalloc(layout.size()).cast()
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from mimalloc.
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator; the new block keeps `layout.align()` by the
        // same rule as `alloc`.
        unsafe {
            if plain_block_fits(new_size, layout.align()) {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every size up to a few pages at every alignment up to 4 KiB: the block is non-null,
    /// aligned, writable to its last byte, and survives a grow and a shrink with its contents.
    #[test]
    fn blocks_have_the_requested_alignment_and_size() {
        let allocator = Allocator;
        let mut sizes: Vec<usize> = (1..=300).collect();
        sizes.extend([511, 512, 513, 1000, 1024, 4095, 4096, 4097, 65_536, 1 << 20]);
        for &size in &sizes {
            for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
                let layout = Layout::from_size_align(size, align).expect("valid layout");
                // SAFETY: non-zero size; the block is used only within `size` bytes and
                // handed back to the allocator that gave it.
                unsafe {
                    for zeroed in [false, true] {
                        let block = if zeroed {
                            allocator.alloc_zeroed(layout)
                        } else {
                            allocator.alloc(layout)
                        };
                        assert!(!block.is_null(), "size {size} align {align}");
                        assert_eq!(block as usize % align, 0, "size {size} align {align}");
                        if zeroed {
                            assert!((0..size).all(|i| *block.add(i) == 0));
                        }
                        block.write_bytes(0xA5, size);
                        let grown = allocator.realloc(block, layout, size * 3);
                        assert!(!grown.is_null());
                        assert_eq!(grown as usize % align, 0, "grown {size} align {align}");
                        assert!((0..size).all(|i| *grown.add(i) == 0xA5));
                        let big = Layout::from_size_align(size * 3, align).expect("valid");
                        let shrunk = allocator.realloc(grown, big, size.div_ceil(2));
                        assert_eq!(shrunk as usize % align, 0, "shrunk {size} align {align}");
                        assert!((0..size.div_ceil(2)).all(|i| *shrunk.add(i) == 0xA5));
                        let half = Layout::from_size_align(size.div_ceil(2), align).expect("ok");
                        allocator.dealloc(shrunk, half);
                    }
                }
            }
        }
    }

    #[test]
    fn plain_blocks_are_used_only_where_they_are_aligned_enough() {
        assert!(plain_block_fits(24, 8));
        assert!(plain_block_fits(32, 16));
        assert!(plain_block_fits(1, 1));
        assert!(
            !plain_block_fits(8, 16),
            "an 8-byte block is only word-aligned"
        );
        assert!(!plain_block_fits(64, 32));
    }
}
