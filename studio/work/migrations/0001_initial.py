"""RunCheckpoint and JournalEntry move here from the eval app: the state only (the tables
keep their names, nothing is copied)."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [("evals", "0004_tool_recordings")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="RunCheckpoint",
                    fields=[
                        ("run_id", models.CharField(max_length=255, primary_key=True, serialize=False)),
                        ("pack", models.CharField(max_length=200)),
                        ("digest", models.CharField(max_length=64)),
                        ("input", models.JSONField()),
                        ("case_id", models.CharField(blank=True, max_length=200, null=True)),
                        ("status", models.CharField(max_length=16)),
                        ("fence", models.PositiveIntegerField()),
                        ("result", models.JSONField(blank=True, null=True)),
                        ("updated_at", models.DateTimeField(default=django.utils.timezone.now)),
                    ],
                    options={"db_table": "evals_runcheckpoint"},
                ),
                migrations.CreateModel(
                    name="JournalEntry",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("seq", models.PositiveIntegerField()),
                        ("kind", models.CharField(max_length=8)),
                        ("node", models.CharField(max_length=100)),
                        ("step", models.PositiveIntegerField()),
                        ("payload", models.JSONField()),
                        (
                            "run",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="journal",
                                to="work.runcheckpoint",
                            ),
                        ),
                    ],
                    options={"ordering": ["seq"], "db_table": "evals_journalentry"},
                ),
                migrations.AddConstraint(
                    model_name="journalentry",
                    constraint=models.UniqueConstraint(fields=("run", "seq"), name="one_entry_per_seq"),
                ),
            ],
            database_operations=[],
        ),
    ]
