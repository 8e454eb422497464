from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("autoscaler", "0003_application_rails"),
    ]

    operations = [
        migrations.AddField(
            model_name="region",
            name="endpoints",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="engine addresses (URLs) that applications in this region may reference; staff declare them",
            ),
        ),
    ]
