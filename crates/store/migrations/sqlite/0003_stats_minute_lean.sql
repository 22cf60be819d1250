-- Minute rows are written most (every run touches the current minute's rows) and read least
-- (short ranges): drop their placement index, which cost about an eighth of a run's commit
-- in the aggregation bench. A publisher's minute report reads the minute range through the
-- bucket index instead.
DROP INDEX stats_minute_placement;
