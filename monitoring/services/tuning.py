"""A use case's tuning changed in the app: the flag's log-probability threshold, the sample rate,
the action threshold and whether the judge gives its evidence, each change recorded (who, when,
old, new) so that the pages can mark the week from which the figures rest on other settings."""

from collections.abc import Mapping

from django.contrib.auth.models import User
from django.db import transaction

from monitoring import extensions
from monitoring.models import JudgeMode, SettingChange, UseCase

TUNABLE = tuple(SettingChange.Field.values)
# Settings that are switched on or off: recorded as 1 and 0 (SettingChange keeps numbers).
SWITCHES = (SettingChange.Field.JUDGE_EVIDENCE.value,)


def _setting(name: str, value: float | bool) -> float | bool:
    """A value as the use case's field holds it: a switch as True or False, the rest as a
    number."""
    return bool(value) if name in SWITCHES else float(value)


@transaction.atomic
def use_case_tune(
    *, use_case: UseCase, user: User | None, values: Mapping[str, float | bool],
    note: str = "", source: str = SettingChange.Source.SETTINGS,
) -> list[SettingChange]:
    """Set ``values`` (of TUNABLE; a switch of SWITCHES as True or False) on the use case and
    record each one that changed.

    Validated by the fields' own validators (ValidationError per field, nothing saved); a value
    equal to the current one is no change and leaves no record.
    """
    unknown = set(values) - set(TUNABLE)
    if unknown:
        raise ValueError(f"not tunable: {sorted(unknown)}")
    locked = UseCase.objects.select_for_update().get(pk=use_case.pk)
    wanted = {name: _setting(name, value) for name, value in values.items()}
    changed = {name: value for name, value in wanted.items() if value != getattr(locked, name)}
    if not changed:
        return []
    old = {name: getattr(locked, name) for name in changed}
    for name, value in changed.items():
        setattr(locked, name, value)
    # The fields' validators (ranges, finite) raise ValidationError; nothing is saved then.
    locked.full_clean(exclude=[f.name for f in UseCase._meta.fields if f.name not in changed],
                      validate_unique=False, validate_constraints=False)
    locked.save(update_fields=list(changed))
    for name, value in changed.items():
        setattr(use_case, name, value)
    return setting_changes_record(
        use_case=locked, user=user, before=old, note=note, source=source
    )


def setting_changes_record(
    *, use_case: UseCase, user: User | None, before: Mapping[str, float | bool],
    note: str = "", source: str = SettingChange.Source.SETTINGS,
) -> list[SettingChange]:
    """Record what changed against ``before`` (values of TUNABLE as they were), for a change
    saved elsewhere too (the admin's form). A switch is recorded as 1 (on) or 0 (off).

    A change has the use case's alarms checked after the commit: an action threshold moved
    above a red week raises its alarm now, not at the next hourly check."""
    changes = SettingChange.objects.bulk_create([
        SettingChange(use_case=use_case, field=name, old_value=float(old),
                      new_value=float(getattr(use_case, name)), changed_by=user,
                      note=note[:200], source=source)
        for name, old in before.items()
        if name in TUNABLE and getattr(use_case, name) != old
    ])
    if changes:
        extensions.alarms_check_soon(use_case_id=use_case.pk)
    return changes


def use_case_judge_set(*, use_case: UseCase, judge_model: str, judge_mode: str) -> None:
    """The judge model and mode new runs of the use case use from now on (runs already made
    keep theirs; the trend marks the week the judge changed)."""
    if judge_mode not in JudgeMode.values:
        raise ValueError(f"judge_mode must be one of {JudgeMode.values}, not {judge_mode!r}")
    UseCase.objects.filter(pk=use_case.pk).update(
        judge_model=judge_model.strip(), judge_mode=judge_mode
    )
    use_case.judge_model, use_case.judge_mode = judge_model.strip(), judge_mode
