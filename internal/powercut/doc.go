// Package powercut is a FUSE filesystem for tests that models what a power
// cut does to a disk. It is a write-back cache over a backing directory:
//
//   - A write lands in the filesystem's own page cache, which reads see,
//     and reaches the backing directory only when the file is fsynced (or
//     fdatasynced).
//   - A namespace change (create, mkdir, unlink, rename) is seen at once,
//     but is durable only once its parent directory is fsynced. The file
//     system keeps, per directory, the entries as seen and the entries as
//     durable.
//   - PowerCut(mode) stops the machine: every operation from then on fails
//     with EIO, and the backing directory is left holding exactly what
//     survived. DropUnsynced loses every unsynced write and namespace
//     change; KeepSomePages and KeepSomeSectors let each unsynced 4 KiB
//     page or 512-byte sector survive or not at random, as a disk's
//     volatile cache may, with the file's size either updated or not, and
//     let each directory's unsynced changes survive or not as a whole.
//   - PowerCutAt(op, n, mode) arms the same cut for the moment the n-th
//     write, fsync, directory fsync, create or rename arrives, which then
//     fails: a test reaches "written but not yet fsynced" or "renamed but
//     the directory not yet synced" without timing luck.
//   - FailFsync makes fsync fail with EIO, once or from then on, as a
//     dying disk does. Like Linux after a writeback error, the pages that
//     fsync should have written are then clean but not on disk: a later
//     fsync that succeeds does not write them (unless they are written
//     again), and a power cut loses them.
//
// The backing directory always holds the durable image: it is loaded at
// Mount, written through on every successful fsync, and rewritten at a
// power cut. A clean Unmount (no power cut) first syncs everything, as a
// clean shutdown does. Everything is also held in memory, so it is meant for
// small trees such as a state directory. Hard links, symlinks, special
// files and renames across directories are refused.
//
// Mount needs /dev/fuse and the right to mount (root, in practice); the
// test is skipped with a message saying which is missing.
package powercut
