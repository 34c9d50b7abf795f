use super::*;

#[test]
fn fragments_follow_the_column_list() {
    let n = KeyRow::COLUMNS.len();
    assert_eq!(KeyRow::COLUMNS[0], "epoch");
    assert!(KeyRow::assignments(Placeholders::Dollar, 19).starts_with("epoch = $19, next_snapshot = $20"));
    assert!(
        KeyRow::placeholders(Placeholders::Question, 4).ends_with(&format!("?{}", 4 + n - 1)),
        "{}",
        KeyRow::placeholders(Placeholders::Question, 4)
    );
    assert!(KeyRow::array_arguments(5).starts_with("$5::int8[], $6::int8[], $7::timestamptz[]"));
    assert!(
        KeyRow::assignments_from_arrays_restamped(20, "l.ord + 1", "k", "d")
            .starts_with("epoch = ($20::int8[])[l.ord + 1], next_snapshot = ($21::int8[])[l.ord + 1], consumer_created_at = CASE WHEN ($22::timestamptz[])[l.ord + 1] IS NOT DISTINCT FROM k.consumer_created_at")
    );
    assert!(KeyRow::select_list("k").starts_with("k.table_name, k.branch, k.consumer_id, k.version, k.epoch"));
}
