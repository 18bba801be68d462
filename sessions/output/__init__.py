"""What a session leaves: the JSON document, the Markdown and JUnit reports, the archive, and the
one vocabulary of status words and event lines they (and the dashboard) share."""
