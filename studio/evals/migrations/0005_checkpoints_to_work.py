"""RunCheckpoint and JournalEntry now belong to the work app (studio.work.models); the
tables stay as they are."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("evals", "0004_tool_recordings"), ("work", "0001_initial")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="JournalEntry"),
                migrations.DeleteModel(name="RunCheckpoint"),
            ],
            database_operations=[],
        ),
    ]
