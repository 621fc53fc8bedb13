"""A use case's tuning changed in the app: the flag's log-probability threshold, the sample rate
and the action threshold, each change recorded (who, when, old, new) so that the pages can mark
the week from which the figures rest on other settings."""

from collections.abc import Mapping

from django.contrib.auth.models import User
from django.db import transaction

from monitoring.models import JudgeMode, SettingChange, UseCase

TUNABLE = tuple(SettingChange.Field.values)


@transaction.atomic
def use_case_tune(
    *, use_case: UseCase, user: User | None, values: Mapping[str, float],
    note: str = "", source: str = SettingChange.Source.SETTINGS,
) -> list[SettingChange]:
    """Set ``values`` (of TUNABLE) on the use case and record each one that changed.

    Validated by the fields' own validators (ValidationError per field, nothing saved); a value
    equal to the current one is no change and leaves no record.
    """
    unknown = set(values) - set(TUNABLE)
    if unknown:
        raise ValueError(f"not tunable: {sorted(unknown)}")
    locked = UseCase.objects.select_for_update().get(pk=use_case.pk)
    changed = {name: float(value) for name, value in values.items()
               if float(value) != getattr(locked, name)}
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
    *, use_case: UseCase, user: User | None, before: Mapping[str, float], note: str = "",
    source: str = SettingChange.Source.SETTINGS,
) -> list[SettingChange]:
    """Record what changed against ``before`` (values of TUNABLE as they were), for a change
    saved elsewhere too (the admin's form)."""
    return SettingChange.objects.bulk_create([
        SettingChange(use_case=use_case, field=name, old_value=old,
                      new_value=getattr(use_case, name), changed_by=user, note=note[:200],
                      source=source)
        for name, old in before.items()
        if name in TUNABLE and getattr(use_case, name) != old
    ])


def use_case_judge_set(*, use_case: UseCase, judge_model: str, judge_mode: str) -> None:
    """The judge model and mode new runs of the use case use from now on (runs already made
    keep theirs; the trend marks the week the judge changed)."""
    if judge_mode not in JudgeMode.values:
        raise ValueError(f"judge_mode must be one of {JudgeMode.values}, not {judge_mode!r}")
    UseCase.objects.filter(pk=use_case.pk).update(
        judge_model=judge_model.strip(), judge_mode=judge_mode
    )
    use_case.judge_model, use_case.judge_mode = judge_model.strip(), judge_mode
