"""Operations: warren ctl, resource alarms, metrics counters and cluster-state snapshots."""
