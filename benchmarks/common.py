"""What the benchmark scripts share: printing a report, and saving it when asked."""


def emit(text: str, save: str | None) -> None:
    """Print the report, and write it to `save` too when given."""
    print(text)
    if save:
        with open(save, "w") as f:
            f.write(text + "\n")
