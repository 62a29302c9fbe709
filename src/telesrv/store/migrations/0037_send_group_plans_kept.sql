-- The group send's statements keep one plan per connection (a generic plan) instead of
-- three of them being planned again on every call, which cost about a quarter of a
-- small group's time; store/functions/telesrv_send_group.sql says why.
ALTER FUNCTION telesrv_send_group(bigint[], bigint[], bigint[], integer[], text[],
    bytea[], bytea[], boolean[], boolean[], boolean[], integer[], text[], bytea[],
    integer[], integer[], integer[], integer[], integer[], bigint[], bigint[], jsonb[],
    bigint[], text[], bigint[], double precision[])
    SET plan_cache_mode = force_generic_plan;
