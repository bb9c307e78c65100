"""The metadata store (issue [4/7]): vhosts, users, permissions, exchanges,
queues, bindings, policies, feature flags and cluster members as one pure,
replicated state machine, and the local projections the hot paths read.

    commands.py       the replicated command records (raft/records.py)
    state.py          MetadataState and its stored records
    machine.py        apply(state, command) and the MetadataMachine around it
    topology.py       the exchange/queue/binding rules apply uses
    effects.py        results and effects: what apply answers and asks for
    projections.py    routing tables, queue targets, users and permissions
    feature_flags.py  the flags this build knows and supports
    snapshot.py       the versioned snapshot encoding
    pmap.py           the persistent map the state is made of
"""
