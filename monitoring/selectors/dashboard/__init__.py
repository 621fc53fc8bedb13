"""Reads for the team-lead dashboard: weekly figures per use case, the overview's rows, the
causes, the trigger's worth and the threshold tuner.

By concern: `weeks` (ISO weeks and bucketing in the database), `reads` (what is read, and as
little as possible), `figures` (a use case's weekly figures), `overview`, `diagnosis` (causes,
the trigger's worth, the tuner) and `page` (the use-case page). The statistics live in
`monitoring.domain` (statistics, causes, tuner, expert_scale).

Weeks are ISO weeks in the site's time zone (Europe/Berlin), Monday 00:00 to Monday 00:00, as
`iso_week_bounds` draws them; a week's answers are those created in it, and so are the judge
runs that judged them (a rescore counts in the week of the answer it rescored).
"""
