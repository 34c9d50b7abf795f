-- The compare-and-set predicate every Postgres write of a key row makes
-- (KeyRow::compare_and_set), spelled once: the row still has the version
-- the write was decided on; its lease is live by the database clock when
-- the write needs it; and the clock is within the tolerance of the
-- decision's estimate of it (SPEC §1). Each statement fills the holes with
-- its own binds or array elements: {{row}} the row's alias and a dot,
-- {{version}}, {{requires_live}}, {{estimated_now}}, {{tolerance}} (µs).

{{row}}version = {{version}}
             AND (NOT {{requires_live}} OR ({{row}}lease_status = 1 AND {{row}}lease_deadline > clock.t))
             AND ({{estimated_now}} IS NULL OR {{tolerance}} IS NULL
                  OR (clock.t >= {{estimated_now}} AND clock.t < {{estimated_now}} + {{tolerance}} * interval '1 microsecond'))
