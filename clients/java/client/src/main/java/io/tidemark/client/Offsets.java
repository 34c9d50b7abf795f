package io.tidemark.client;

import io.tidemark.v1.Offset;

/**
 * End offsets of micro-batches and the batch ids they commit with, as the Python and Rust SDKs
 * build them (testdata/offsets.json holds the shared vectors).
 *
 * <p>The server moves a consumer only with completion metadata ({@code total_splits}): an offset
 * without it is an older checkpoint's and is answered UNCHANGED_LEGACY_OFFSET (SPEC C6). Build one
 * only on purpose, with {@link #legacy}.
 */
public final class Offsets {
  /**
   * Batch ids grow with the end offset: {@code snapshot × 1,000,000 + index + 1}, so a repeated end
   * gives the same id (DUPLICATE) and an older, late one a lower id (a no-op), as SPEC C5 expects.
   * Spark does not hand its batch id to a source's commit, so the id is derived from the end.
   */
  public static final long SPLITS_PER_SNAPSHOT_LIMIT = 1_000_000L;

  /** Paimon's index before the first split of a snapshot. */
  public static final long BEFORE_FIRST_SPLIT = -1;

  private Offsets() {}

  /** The whole of snapshot {@code snapshotId}: one split, read. */
  public static Offset complete(long snapshotId, boolean scanSnapshot) {
    return partial(snapshotId, 0, 1, scanSnapshot);
  }

  /** Split {@code index} (0-based) of the {@code totalSplits} of snapshot {@code snapshotId}. */
  public static Offset partial(long snapshotId, long index, long totalSplits, boolean scanSnapshot) {
    if (totalSplits < 1) {
      throw new IllegalArgumentException("totalSplits must be at least 1, got " + totalSplits);
    }
    if (index < BEFORE_FIRST_SPLIT || index >= totalSplits) {
      throw new IllegalArgumentException(
          "index must be in [-1, totalSplits), got " + index + " of " + totalSplits);
    }
    return Offset.newBuilder()
        .setSnapshotId(snapshotId)
        .setIndex(index)
        .setScanSnapshot(scanSnapshot)
        .setTotalSplits(totalSplits)
        .build();
  }

  /** An offset without completion metadata, as an older checkpoint holds it. */
  public static Offset legacy(long snapshotId, long index, boolean scanSnapshot) {
    return Offset.newBuilder()
        .setSnapshotId(snapshotId)
        .setIndex(index)
        .setScanSnapshot(scanSnapshot)
        .build();
  }

  /** Whether every split of the offset's snapshot was read (needs completion metadata). */
  public static boolean isComplete(Offset offset) {
    return offset.hasTotalSplits() && offset.getIndex() + 1 >= offset.getTotalSplits();
  }

  /** Whether the offset carries completion metadata at all. */
  public static boolean isLegacy(Offset offset) {
    return !offset.hasTotalSplits();
  }

  /** The CommitBatch id of a micro-batch ending at {@code end}. */
  public static long batchId(Offset end) {
    return Math.addExact(
        Math.multiplyExact(end.getSnapshotId(), SPLITS_PER_SNAPSHOT_LIMIT), end.getIndex() + 1);
  }
}
