import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("evals", "0002_leases"),
        ("deployments", "0003_tiers_may_be_empty"),
    ]

    operations = [
        migrations.AddField(
            model_name="eval",
            name="tiers",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name="eval",
            name="deployment",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="evals",
                to="deployments.deployment",
            ),
        ),
        migrations.AddField(
            model_name="evalcase",
            name="settled_by",
            field=models.CharField(blank=True, max_length=100),
        ),
    ]
