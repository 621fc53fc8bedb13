"""Judge prices out of the box (issue 41, point 6): the list prices of common judge models
(monitoring/domain/prices.py, "Listenpreise Stand" LIST_PRICES_AS_OF, in US dollars), written
where a model has no price yet; an operator's price is never changed. They are ordinary
JudgePrice rows, edited in the admin. Past runs of these models that ran without a price are
priced by the nightly task, or at once by `manage.py price_past_runs`."""

from django.db import migrations

from monitoring.domain.prices import LIST_PRICES, missing_list_prices


def create_list_prices(apps, schema_editor):
    JudgePrice = apps.get_model("monitoring", "JudgePrice")
    existing = JudgePrice.objects.values_list("judge_model", flat=True)
    JudgePrice.objects.bulk_create([
        JudgePrice(judge_model=p.judge_model, prompt_per_1k=p.prompt_per_1k,
                   cached_prompt_per_1k=p.cached_prompt_per_1k,
                   completion_per_1k=p.completion_per_1k, currency=p.currency)
        for p in missing_list_prices(existing, LIST_PRICES)
    ], ignore_conflicts=True)


class Migration(migrations.Migration):

    dependencies = [
        ("monitoring", "0030_judge_run_trigger_on_demand"),
    ]

    operations = [
        migrations.RunPython(create_list_prices, migrations.RunPython.noop),
    ]
