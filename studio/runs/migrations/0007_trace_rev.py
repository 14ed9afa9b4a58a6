from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0006_runs_list_order"),
    ]

    operations = [
        migrations.AddField(
            model_name="tryrun",
            name="trace_rev",
            field=models.PositiveIntegerField(default=0),
        ),
    ]
